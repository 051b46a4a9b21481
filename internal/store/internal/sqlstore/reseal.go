package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/reinsdev/reins/internal/store"
)

// ResealSecrets replaces, in one transaction, every blob the store keeps
// sealed under the master key (credentials' secrets, sessions' repository
// tokens, webhook endpoints' signing secrets) with what reseal returns
// for it, and records toKeyID as the master key's id (the setting
// vault_key_id). It fails, changing nothing, when the recorded id is
// neither fromKeyID nor absent, or when reseal fails. It returns the number of blobs resealed. A credential's version
// moves on, so that a writer holding an older copy loses its
// compare-and-swap instead of writing back the old seal.
func (s *Store) ResealSecrets(ctx context.Context, fromKeyID, toKeyID string, reseal func(store.SealedRef, []byte) ([]byte, error)) (int, error) {
	var n int
	err := s.d.WithTx(ctx, func(tx Querier) error {
		n = 0
		var cur string
		err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE name = 'vault_key_id'`).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if cur != "" && cur != fromKeyID {
			return fmt.Errorf("the database's secrets are sealed under master key id %s, not %s: %w", cur, fromKeyID, store.ErrConflict)
		}
		creds, err := resealCredentials(ctx, tx, reseal)
		if err != nil {
			return err
		}
		tokens, err := resealRepositoryTokens(ctx, tx, reseal)
		if err != nil {
			return err
		}
		hooks, err := resealWebhookSecrets(ctx, tx, reseal)
		if err != nil {
			return err
		}
		n = creds + tokens + hooks
		_, err = tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ('vault_key_id', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, toKeyID)
		return err
	})
	return n, err
}

type sealedRow struct {
	ref    store.SealedRef
	sealed []byte
}

func resealCredentials(ctx context.Context, tx Querier, reseal func(store.SealedRef, []byte) ([]byte, error)) (int, error) {
	rows, err := collect(ctx, tx, func(r Row) (sealedRow, error) {
		var v sealedRow
		err := r.Scan(&v.ref.CredentialID, &v.sealed)
		return v, err
	}, `SELECT id, sealed FROM vault_credentials ORDER BY id`)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if len(r.sealed) == 0 {
			continue // no secret (see sealedBytes)
		}
		b, err := reseal(r.ref, r.sealed)
		if err != nil {
			return 0, fmt.Errorf("credential %s: %w", r.ref.CredentialID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE vault_credentials SET sealed = ?, version = version + 1 WHERE id = ?`, b, r.ref.CredentialID); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

func resealRepositoryTokens(ctx context.Context, tx Querier, reseal func(store.SealedRef, []byte) ([]byte, error)) (int, error) {
	rows, err := collect(ctx, tx, func(r Row) (sealedRow, error) {
		var v sealedRow
		err := r.Scan(&v.ref.SessionID, &v.ref.ResourceID, &v.sealed)
		return v, err
	}, `SELECT session_id, resource_id, sealed FROM repository_tokens ORDER BY session_id, resource_id`)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		b, err := reseal(r.ref, r.sealed)
		if err != nil {
			return 0, fmt.Errorf("repository token of %s %s: %w", r.ref.SessionID, r.ref.ResourceID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE repository_tokens SET sealed = ? WHERE session_id = ? AND resource_id = ?`, b, r.ref.SessionID, r.ref.ResourceID); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// resealWebhookSecrets reseals the endpoints' signing secrets, whose
// associated data is the endpoint's id (given as SealedRef.CredentialID).
func resealWebhookSecrets(ctx context.Context, tx Querier, reseal func(store.SealedRef, []byte) ([]byte, error)) (int, error) {
	rows, err := collect(ctx, tx, func(r Row) (sealedRow, error) {
		var v sealedRow
		err := r.Scan(&v.ref.CredentialID, &v.sealed)
		return v, err
	}, `SELECT id, sealed FROM webhook_endpoints ORDER BY id`)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		b, err := reseal(r.ref, r.sealed)
		if err != nil {
			return 0, fmt.Errorf("webhook endpoint %s: %w", r.ref.CredentialID, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET sealed = ? WHERE id = ?`, b, r.ref.CredentialID); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}
