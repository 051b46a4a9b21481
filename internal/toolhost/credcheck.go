package toolhost

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// CheckStore is what CredentialCheck reads.
type CheckStore interface {
	environmentGetter
	credentialLister
}

// NewCredentialCheck returns the harness's CredentialChecker of st.
func NewCredentialCheck(st CheckStore) harness.CredentialChecker { return credentialCheck{st} }

// credentialCheck is the harness's CredentialChecker: every
// environment_variable credential of the session's vaults must only allow
// hosts that the environment's network policy permits.
type credentialCheck struct{ st CheckStore }

// Check implements harness.CredentialChecker.
func (c credentialCheck) Check(ctx context.Context, sessionID, envID string, vaultIDs []string) error {
	env, err := c.st.GetEnvironment(ctx, envID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	n := env.Config.Networking
	if env.Config.Type != ma.EnvCloud || n == nil || n.Type != "limited" {
		return nil // unrestricted (or self-hosted: not injected there)
	}
	for _, vid := range vaultIDs {
		creds, err := liveCredentials(ctx, c.st, vid)
		if err != nil {
			return err
		}
		for _, cr := range creds {
			if cr.Auth.Type != ma.AuthEnvVar || cr.Auth.Networking == nil || cr.Auth.Networking.Type != "limited" {
				continue
			}
			for _, h := range cr.Auth.Networking.AllowedHosts {
				if !permits(n.AllowedHosts, h) {
					return &harness.CredentialError{CredentialID: cr.ID, VaultID: vid, Host: h}
				}
			}
		}
	}
	return nil
}

// permits reports whether a host pattern (a host, an IP or "*.domain") is
// covered by the environment's allowed hosts.
func permits(allowed []string, host string) bool {
	host = strings.ToLower(host)
	for _, a := range allowed {
		a = strings.ToLower(a)
		switch {
		case a == host:
			return true
		case strings.HasPrefix(a, "*."):
			suffix := a[1:] // ".domain"
			if net.ParseIP(host) == nil && strings.HasSuffix(strings.TrimPrefix(host, "*"), suffix) {
				return true
			}
		}
	}
	return false
}
