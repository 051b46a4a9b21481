package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/reinsdev/reins/backoff"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

const (
	// refreshTimeout bounds one request to a token endpoint.
	refreshTimeout = 30 * time.Second
	// refreshClaim is how long a claim on a credential's refresh holds:
	// longer than the request it covers, so that only a holder that died
	// loses it to another process.
	refreshClaim = refreshTimeout + 15*time.Second
)

// claimWait spaces the reads of a caller waiting for another process's
// refresh.
var claimWait = backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}

// refresher refreshes mcp_oauth credentials once among the processes
// sharing a store.
type refresher struct {
	client *http.Client
	st     VaultStore
	keys   *vault.Keyring
	skew   time.Duration
	log    *slog.Logger // nil: not logged
}

// refresh returns a fresh access token for seen, the credential whose
// access token was found wanting: the one another caller stored since,
// else one it gets from the token endpoint after claiming the refresh.
func (r refresher) refresh(ctx context.Context, seen store.Credential) (store.Credential, string, error) {
	stale, err := r.keys.OpenSecrets(seen.Sealed, seen.ID)
	if err != nil {
		return seen, "", err
	}
	for attempt := 1; ; attempt++ {
		cur, err := r.st.GetCredential(ctx, seen.VaultID, seen.ID)
		if err != nil {
			return seen, "", err
		}
		sec, err := r.keys.OpenSecrets(cur.Sealed, cur.ID)
		if err != nil {
			return cur, "", err
		}
		switch {
		case sec.AccessToken != stale.AccessToken && !expired(cur.Auth.ExpiresAt, r.skew):
			return cur, sec.AccessToken, nil // refreshed by another caller
		case time.Now().Before(cur.RefreshUntil):
			// Another process is refreshing it.
			if err := sleep(ctx, claimWait.Delay(attempt)); err != nil {
				return cur, "", err
			}
			continue
		}
		claimed, err := r.st.SwapCredential(ctx, cur.VaultID, cur.ID, cur.Version, func(c *store.Credential) error {
			c.RefreshUntil = time.Now().Add(refreshClaim)
			return nil
		})
		if errors.Is(err, store.ErrConflict) {
			continue // another caller wrote first: read what it wrote
		}
		if err != nil {
			return cur, "", err
		}
		return r.exchange(ctx, claimed)
	}
}

// exchange refreshes claimed, whose refresh this caller holds, at its
// token endpoint, and stores the new token at the claim's version, which
// gives the claim up. A failed refresh gives it up too.
func (r refresher) exchange(ctx context.Context, claimed store.Credential) (store.Credential, string, error) {
	sec, err := r.keys.OpenSecrets(claimed.Sealed, claimed.ID)
	if err != nil {
		r.release(ctx, claimed)
		return claimed, "", err
	}
	ref := claimed.Auth.Refresh
	if ref == nil || sec.RefreshToken == "" {
		r.release(ctx, claimed)
		return claimed, "", errors.New("no refresh configuration")
	}
	req := RefreshRequest{TokenEndpoint: ref.TokenEndpoint, ClientID: ref.ClientID, RefreshToken: sec.RefreshToken,
		AuthType: ref.TokenEndpointAuth.Type, ClientSecret: sec.ClientSecret}
	if ref.Resource != nil {
		req.Resource = *ref.Resource
	}
	if ref.Scope != nil {
		req.Scope = *ref.Scope
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	res, err := Refresh(rctx, r.client, req)
	if err != nil {
		r.release(ctx, claimed)
		return claimed, "", err
	}
	sec.AccessToken = res.AccessToken
	if res.RefreshToken != "" {
		sec.RefreshToken = res.RefreshToken
	}
	sealed, err := r.keys.SealSecrets(sec, claimed.ID)
	if err != nil {
		r.release(ctx, claimed)
		return claimed, "", err
	}
	now := time.Now()
	out, err := r.st.SwapCredential(context.WithoutCancel(ctx), claimed.VaultID, claimed.ID, claimed.Version, func(cur *store.Credential) error {
		cur.Sealed = sealed
		cur.Auth.ExpiresAt = nil
		if res.ExpiresIn > 0 {
			exp := ma.Time(now.Add(res.ExpiresIn))
			cur.Auth.ExpiresAt = &exp
		}
		cur.UpdatedAt = ma.Time(now)
		cur.RefreshUntil = time.Time{}
		return nil
	})
	if err != nil {
		// The claim was overtaken (the credential was rewritten meanwhile):
		// what the endpoint gave is not stored.
		return claimed, "", fmt.Errorf("store the refreshed token: %w", err)
	}
	if r.log != nil {
		r.log.Info("mcp_oauth token refreshed", "credential_id", claimed.ID, "vault_id", claimed.VaultID, "rotated", res.RefreshToken != "")
	}
	return out, res.AccessToken, nil
}

// release gives up the claim on claimed's refresh, so that the next caller
// may try at once rather than when the claim expires.
func (r refresher) release(ctx context.Context, claimed store.Credential) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := r.st.SwapCredential(ctx, claimed.VaultID, claimed.ID, claimed.Version, func(cur *store.Credential) error {
		cur.RefreshUntil = time.Time{}
		return nil
	})
	if err != nil && r.log != nil {
		r.log.Warn("giving up the claim on an mcp_oauth refresh", "credential_id", claimed.ID, "err", err)
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
