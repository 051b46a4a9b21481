package toolhost

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// vaultStore serves one environment and the credentials of vault "vlt_1"
// the way the stores do: in creation order, after a position, at most
// Limit at a time (20 when Limit is 0).
type vaultStore struct {
	env   ma.Environment
	creds []store.Credential
}

func (s *vaultStore) GetEnvironment(_ context.Context, id string) (ma.Environment, error) {
	if id != s.env.ID {
		return ma.Environment{}, store.ErrNotFound
	}
	return s.env, nil
}

func (s *vaultStore) ListCredentials(_ context.Context, vaultID string, q store.ListQuery) ([]store.Item[store.Credential], error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	var out []store.Item[store.Credential]
	for i, c := range s.creds {
		pos := int64(i + 1)
		if vaultID != "vlt_1" || pos <= q.After || (c.ArchivedAt != nil && !q.IncludeArchived) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, store.Item[store.Credential]{Pos: pos, Value: c})
	}
	return out, nil
}

// manyCredentials makes n environment_variable credentials allowing
// api.example.com; the last one allows host last instead.
func manyCredentials(n int, last string) []store.Credential {
	out := make([]store.Credential, n)
	for i := range out {
		host := "api.example.com"
		if i == n-1 {
			host = last
		}
		out[i].ID = fmt.Sprintf("vcrd_%d", i)
		out[i].Auth = ma.CredentialAuth{Type: ma.AuthEnvVar, SecretName: fmt.Sprintf("S%d", i),
			Networking: &ma.CredentialNetworking{Type: "limited", AllowedHosts: []string{host}}}
	}
	return out
}

func TestLiveCredentialsReadsEveryPage(t *testing.T) {
	for _, n := range []int{0, 1, credentialPage, credentialPage + 1, 1001} {
		st := &vaultStore{creds: manyCredentials(n, "x")}
		got, err := liveCredentials(t.Context(), st, "vlt_1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Errorf("%d credentials: liveCredentials returned %d", n, len(got))
		}
	}
}

// TestCredentialCheckSeesEveryCredential puts the one credential that
// breaks the environment's network policy last of 1001.
func TestCredentialCheckSeesEveryCredential(t *testing.T) {
	st := &vaultStore{
		env:   ma.Environment{ID: "env_1", Config: ma.EnvironmentConfig{Type: ma.EnvCloud, Networking: &ma.Networking{Type: "limited", AllowedHosts: []string{"api.example.com"}}}},
		creds: manyCredentials(1001, "evil.example.net"),
	}
	err := credentialCheck{st}.Check(t.Context(), "sesn_1", "env_1", []string{"vlt_1"})
	var ce *harness.CredentialError
	if !errors.As(err, &ce) || ce.CredentialID != "vcrd_1000" {
		t.Fatalf("Check = %v, want a CredentialError for vcrd_1000", err)
	}
}
