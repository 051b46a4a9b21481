package toolhost

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/egress"
)

// credentialPage is the page size in which liveCredentials reads a vault.
const credentialPage = 200

// liveCredentials returns every live (unarchived) credential of the vault
// in creation order, reading it page by page: a vault has no bound on its
// credentials, and a session must see all of them.
func liveCredentials(ctx context.Context, st credentialLister, vaultID string) ([]store.Credential, error) {
	var out []store.Credential
	var after int64
	for {
		items, err := st.ListCredentials(ctx, vaultID, store.ListQuery{After: after, Limit: credentialPage})
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it.Value.ArchivedAt == nil {
				out = append(out, it.Value)
			}
		}
		if len(items) < credentialPage {
			return out, nil
		}
		after = items[len(items)-1].Pos
	}
}

// secret is an environment_variable credential opened for a session.
type secret struct {
	name, value string
	hosts       []string // the credential's allowed hosts; nil: unrestricted
	header      bool     // substituted in request headers (and query strings)
	body        bool     // substituted in request bodies
}

// credentials opens the session's environment_variable credentials.
func (t *Host) credentials(ctx context.Context, sess *ma.Session) ([]secret, error) {
	var secrets []secret
	seen := map[string]bool{}
	for _, vid := range sess.VaultIDs {
		creds, err := liveCredentials(ctx, t.st, vid)
		if err != nil {
			return nil, err
		}
		for _, c := range creds {
			if c.Auth.Type != ma.AuthEnvVar || seen[c.Auth.SecretName] {
				continue // the first vault that has the name wins
			}
			seen[c.Auth.SecretName] = true
			sec, err := t.keys.OpenSecrets(c.Sealed, c.ID)
			if err != nil {
				return nil, fmt.Errorf("credential %s: %w", c.ID, err)
			}
			secrets = append(secrets, newSecret(c.Auth, sec.Value))
		}
	}
	return secrets, nil
}

// newSecret reads where a credential may be used (the API stores
// injection_location with headers on when it is not given).
func newSecret(a ma.CredentialAuth, value string) secret {
	s := secret{name: a.SecretName, value: value, header: true}
	if l := a.InjectionLocation; l != nil {
		s.header, s.body = l.Header, l.Body
	}
	if n := a.Networking; n != nil && n.Type == "limited" {
		s.hosts = append([]string{}, n.AllowedHosts...)
	}
	return s
}

// credentialEnv returns the variables that carry a session's credentials
// into its tools. In a sandbox each holds a placeholder, unique to the
// session and credential, which the sandbox's egress proxy replaces with
// the value in requests to the credential's hosts; the value never enters
// the sandbox. Without sandboxes the value is injected as it is.
func (t *Host) credentialEnv(sessionID string, secrets []secret) (map[string]string, error) {
	env := map[string]string{}
	if t.sandboxes == nil {
		for _, s := range secrets {
			env[s.name] = s.value
		}
		return env, nil
	}
	creds := make([]egress.Credential, 0, len(secrets))
	for _, s := range secrets {
		ph, err := newPlaceholder()
		if err != nil {
			return nil, err
		}
		env[s.name] = ph
		creds = append(creds, egress.Credential{Placeholder: ph, Value: s.value, Hosts: s.hosts, Header: s.header, Body: s.body})
	}
	t.sandboxes.setCredentials(sessionID, creds)
	return env, nil
}

// newPlaceholder returns a placeholder: URL-safe, fixed length, random,
// so that no placeholder contains another.
func newPlaceholder() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "reins_placeholder_" + hex.EncodeToString(b[:]), nil
}
