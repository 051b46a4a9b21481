package app

import (
	"context"

	"github.com/reinsdev/reins/internal/store"
)

// credentialLister is what liveCredentials needs of the store.
type credentialLister interface {
	ListCredentials(ctx context.Context, vaultID string, q store.ListQuery) ([]store.Item[store.Credential], error)
}

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
