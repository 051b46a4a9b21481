package httpapi

import (
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// VaultConfig configures the vault and credential endpoints.
type VaultConfig struct {
	// Store holds vaults; nil means Config.Store, which must then
	// implement store.Vaults.
	Store store.Vaults
	// Keyring seals credential secrets. Required.
	Keyring *vault.Keyring
	// ProbeClient makes the requests of mcp_oauth_validate (MCP probe and
	// token refresh) to the URLs users give. Build it with
	// netguard.Guard.Client; nil means a client of the zero Guard (which
	// refuses internal addresses) with a 15 s timeout.
	ProbeClient *http.Client
}

// vaultAPI serves the vault endpoints.
type vaultAPI struct {
	s     *Server
	st    store.Vaults
	keys  *vault.Keyring
	probe *http.Client
}

// vaultRoutes registers the vault and credential endpoints.
func (s *Server) vaultRoutes(cfg VaultConfig) {
	st := cfg.Store
	if st == nil {
		v, ok := any(s.cfg.Store).(store.Vaults)
		if !ok {
			panic("httpapi: VaultConfig.Store is required when Config.Store holds no vaults")
		}
		st = v
	}
	if cfg.Keyring == nil {
		panic("httpapi: VaultConfig.Keyring is required")
	}
	probe := cfg.ProbeClient
	if probe == nil {
		probe = (&netguard.Guard{}).Client(15 * time.Second)
	}
	v := &vaultAPI{s: s, st: st, keys: cfg.Keyring, probe: probe}
	s.handle("POST /v1/vaults", smallBody, v.createVault)
	s.handle("GET /v1/vaults", smallBody, v.listVaults)
	s.handle("GET /v1/vaults/{id}", smallBody, v.getVault)
	s.handle("POST /v1/vaults/{id}", smallBody, v.updateVault)
	s.handle("POST /v1/vaults/{id}/archive", smallBody, v.archiveVault)
	s.handle("DELETE /v1/vaults/{id}", smallBody, v.deleteVault)

	s.handle("POST /v1/vaults/{id}/credentials", smallBody, v.createCredential)
	s.handle("GET /v1/vaults/{id}/credentials", smallBody, v.listCredentials)
	s.handle("GET /v1/vaults/{id}/credentials/{cid}", smallBody, v.getCredential)
	s.handle("POST /v1/vaults/{id}/credentials/{cid}", smallBody, v.updateCredential)
	s.handle("POST /v1/vaults/{id}/credentials/{cid}/archive", smallBody, v.archiveCredential)
	s.handle("DELETE /v1/vaults/{id}/credentials/{cid}", smallBody, v.deleteCredential)
	s.handle("POST /v1/vaults/{id}/credentials/{cid}/mcp_oauth_validate", smallBody, v.validateCredential)
}

type vaultCreate struct {
	DisplayName *string           `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
}

func (v *vaultAPI) createVault(w http.ResponseWriter, r *http.Request) error {
	var p vaultCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if p.DisplayName == nil {
		return badRequest("display_name: required")
	}
	if err := checkLen("display_name", *p.DisplayName, 1, 255); err != nil {
		return err
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return err
	}
	meta := ma.Metadata(p.Metadata)
	if meta == nil {
		meta = ma.Metadata{}
	}
	now := ma.Time(time.Now())
	vt := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: *p.DisplayName, Metadata: meta, CreatedAt: now, UpdatedAt: now}
	ctx := withAudit(r, "vault.created", "vault", vt.ID, requestWorkspace(r), map[string]string{"display_name": vt.DisplayName})
	if err := v.st.CreateVault(ctx, vt); err != nil {
		return err
	}
	writeJSON(w, vt)
	return nil
}

func (v *vaultAPI) getVault(w http.ResponseWriter, r *http.Request) error {
	vt, err := v.st.GetVault(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, vt)
	return nil
}

type vaultUpdate struct {
	DisplayName optString     `json:"display_name"`
	Metadata    metadataPatch `json:"metadata"`
}

func (v *vaultAPI) updateVault(w http.ResponseWriter, r *http.Request) error {
	var p vaultUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	ctx := withAudit(r, "vault.updated", "vault", r.PathValue("id"), requestWorkspace(r), p.auditDetails())
	vt, err := v.st.UpdateVault(ctx, r.PathValue("id"), func(cur *ma.Vault) error {
		if cur.ArchivedAt != nil {
			return conflict("vault %s is archived and read-only", cur.ID)
		}
		changed := false
		if p.DisplayName.Set {
			if p.DisplayName.Null {
				return badRequest("display_name: cannot be cleared")
			}
			if err := checkLen("display_name", p.DisplayName.Value, 1, 255); err != nil {
				return err
			}
			changed = changed || cur.DisplayName != p.DisplayName.Value
			cur.DisplayName = p.DisplayName.Value
		}
		if p.Metadata != nil {
			if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
				return err
			}
			cur.Metadata = applyMetadata(cur.Metadata, p.Metadata)
			changed = true
		}
		if changed {
			cur.UpdatedAt = ma.Time(time.Now())
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, vt)
	return nil
}

func (v *vaultAPI) archiveVault(w http.ResponseWriter, r *http.Request) error {
	ctx := withAudit(r, "vault.archived", "vault", r.PathValue("id"), requestWorkspace(r), nil)
	vt, err := v.st.ArchiveVault(ctx, r.PathValue("id"), ma.Time(time.Now()))
	if err != nil {
		return err
	}
	writeJSON(w, vt)
	return nil
}

func (v *vaultAPI) deleteVault(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := v.st.DeleteVault(withAudit(r, "vault.deleted", "vault", id, requestWorkspace(r), nil), id); err != nil {
		return err
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "vault_deleted"})
	return nil
}

func (v *vaultAPI) listVaults(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := v.st.ListVaults(r.Context(), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}

// auditDetails names what an update changes (no values but the name).
func (p vaultUpdate) auditDetails() map[string]any {
	d := map[string]any{}
	if p.DisplayName.Set {
		d["display_name"] = p.DisplayName.Value
	}
	if p.Metadata != nil {
		d["metadata"] = "changed"
	}
	return d
}
