package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

type configParam struct {
	Type       string         `json:"type"`
	Networking *ma.Networking `json:"networking"`
	Packages   *packagesParam `json:"packages"`
}

type packagesParam struct {
	Type  string   `json:"type"`
	Apt   []string `json:"apt"`
	Cargo []string `json:"cargo"`
	Gem   []string `json:"gem"`
	Go    []string `json:"go"`
	Npm   []string `json:"npm"`
	Pip   []string `json:"pip"`
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// resolveConfig validates an environment config and fills its defaults.
func (s *Server) resolveEnvConfig(p *configParam) (ma.EnvironmentConfig, error) {
	if p == nil {
		p = &configParam{Type: ma.EnvCloud}
	}
	switch p.Type {
	case ma.EnvSelfHosted:
		if p.Networking != nil || p.Packages != nil {
			return ma.EnvironmentConfig{}, badRequest("config: networking and packages apply to cloud environments only")
		}
		return ma.EnvironmentConfig{Type: ma.EnvSelfHosted}, nil
	case ma.EnvCloud:
	default:
		return ma.EnvironmentConfig{}, badRequest("config.type: must be cloud or self_hosted; got %q", p.Type)
	}
	out := ma.EnvironmentConfig{Type: ma.EnvCloud, Networking: &ma.Networking{Type: "unrestricted"},
		Packages: &ma.Packages{Type: "packages", Apt: []string{}, Cargo: []string{}, Gem: []string{}, Go: []string{}, Npm: []string{}, Pip: []string{}}}
	if n := p.Networking; n != nil {
		switch n.Type {
		case "unrestricted":
			if len(n.AllowedHosts) > 0 {
				return out, badRequest("config.networking.allowed_hosts: only with type limited")
			}
		case "limited":
			for i, h := range n.AllowedHosts {
				if err := validHost(h); err != nil {
					return out, badRequest("config.networking.allowed_hosts[%d]: %v", i, err)
				}
			}
			f := false
			nn := *n
			nn.AllowedHosts = orEmpty(n.AllowedHosts)
			if nn.AllowPackageManagers == nil {
				nn.AllowPackageManagers = &f
			}
			if nn.AllowMCPServers == nil {
				nn.AllowMCPServers = &f
			}
			out.Networking = &nn
		default:
			return out, badRequest("config.networking.type: must be unrestricted or limited; got %q", n.Type)
		}
	}
	if pk := p.Packages; pk != nil {
		if pk.Type != "" && pk.Type != "packages" {
			return out, badRequest("config.packages.type: must be \"packages\"; got %q", pk.Type)
		}
		out.Packages = &ma.Packages{Type: "packages", Apt: orEmpty(pk.Apt), Cargo: orEmpty(pk.Cargo), Gem: orEmpty(pk.Gem), Go: orEmpty(pk.Go), Npm: orEmpty(pk.Npm), Pip: orEmpty(pk.Pip)}
		if v := s.cfg.ValidatePackages; v != nil {
			if err := v(out.Packages); err != nil {
				return out, badRequest("config.%s", err)
			}
		}
	}
	return out, nil
}

// validHost accepts a bare host name, an IP address or "*.domain".
func validHost(h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 || strings.ContainsAny(name, "/:@ *") {
		return fmt.Errorf("%q is not a bare host name, IP address or *.domain", h)
	}
	return nil
}

type environmentCreate struct {
	Name        *string           `json:"name"`
	Description string            `json:"description"`
	Config      *configParam      `json:"config"`
	Scope       *string           `json:"scope"`
	Metadata    map[string]string `json:"metadata"`
}

func validScope(scope *string, cfg ma.EnvironmentConfig) error {
	if scope == nil {
		return nil
	}
	if *scope != "organization" && *scope != "account" {
		return badRequest("scope: must be organization or account; got %q", *scope)
	}
	if cfg.Type != ma.EnvSelfHosted {
		return badRequest("scope: applies to self_hosted environments only")
	}
	return nil
}

// createEnvironment creates an environment. Sent with an
// Idempotency-Key, the environment is recorded with its creation, and the
// request repeated with the key answers it as first created (not a 409
// for its name).
func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	idem, err := s.idempotency(r)
	if err != nil {
		return err
	}
	var p environmentCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if done, err := s.replayOutcome(w, r, idem); done || err != nil {
		return err
	}
	if p.Name == nil {
		return badRequest("name: required")
	}
	if err := checkLen("name", *p.Name, 1, 256); err != nil {
		return err
	}
	if err := checkLen("description", p.Description, 0, 2048); err != nil {
		return err
	}
	cfg, err := s.resolveEnvConfig(p.Config)
	if err != nil {
		return err
	}
	if err := validScope(p.Scope, cfg); err != nil {
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
	e := ma.Environment{ID: ids.New(ids.Environment), Type: "environment", Name: *p.Name, Description: p.Description,
		Config: cfg, Metadata: meta, Scope: p.Scope, CreatedAt: now, UpdatedAt: now}
	return s.createKept(w, r, idem, e, func(ctx context.Context) error {
		err := s.cfg.Store.CreateEnvironment(ctx, e)
		if isConflict(err) {
			return conflict("name: an environment named %q already exists", *p.Name)
		}
		return err
	})
}

func (s *Server) getEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.cfg.Store.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, e)
	return nil
}

type environmentUpdate struct {
	Name        optString     `json:"name"`
	Description optString     `json:"description"`
	Config      *configParam  `json:"config"`
	Scope       optString     `json:"scope"`
	Metadata    metadataPatch `json:"metadata"`
}

func (s *Server) updateEnvironment(w http.ResponseWriter, r *http.Request) error {
	var p environmentUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	e, err := s.cfg.Store.UpdateEnvironment(r.Context(), r.PathValue("id"), func(cur *ma.Environment) error {
		if cur.ArchivedAt != nil {
			return conflict("environment %s is archived and read-only", cur.ID)
		}
		before, _ := json.Marshal(cur)
		if p.Name.Set {
			if p.Name.Null {
				return badRequest("name: cannot be cleared")
			}
			if err := checkLen("name", p.Name.Value, 1, 256); err != nil {
				return err
			}
			cur.Name = p.Name.Value
		}
		if p.Description.Set {
			if err := checkLen("description", p.Description.Value, 0, 2048); err != nil {
				return err
			}
			cur.Description = p.Description.Value
		}
		if p.Config != nil {
			cfg, err := s.resolveEnvConfig(p.Config)
			if err != nil {
				return err
			}
			if cfg.Type != cur.Config.Type {
				return badRequest("config.type: environment %s is %s and its type cannot change (its keys, executors and live sessions depend on it); create a new %s environment instead",
					cur.ID, cur.Config.Type, cfg.Type)
			}
			cur.Config = cfg
		}
		if p.Scope.Set {
			if p.Scope.Null || p.Scope.Value == "" {
				cur.Scope = nil
			} else {
				v := p.Scope.Value
				cur.Scope = &v
			}
		}
		if err := validScope(cur.Scope, cur.Config); err != nil {
			return err
		}
		if p.Metadata != nil {
			if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
				return err
			}
			cur.Metadata = applyMetadata(cur.Metadata, p.Metadata)
		}
		if after, _ := json.Marshal(cur); string(after) != string(before) {
			cur.UpdatedAt = ma.Time(time.Now())
		}
		return nil
	})
	if err != nil {
		if isConflict(err) {
			return conflict("name: an environment named %q already exists", p.Name.Value)
		}
		return err
	}
	writeJSON(w, e)
	return nil
}

func (s *Server) archiveEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := s.cfg.Store.UpdateEnvironment(r.Context(), r.PathValue("id"), func(cur *ma.Environment) error {
		if cur.ArchivedAt == nil {
			now := ma.Time(time.Now())
			cur.ArchivedAt = &now
			cur.UpdatedAt = now
		}
		return nil
	})
	if err != nil {
		return err
	}
	if s.cfg.Lifecycle != nil {
		s.cfg.Lifecycle.EnvironmentArchived(r.Context(), e.ID)
	}
	writeJSON(w, e)
	return nil
}

func (s *Server) deleteEnvironment(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.cfg.Store.DeleteEnvironment(r.Context(), id); err != nil {
		return err
	}
	s.cfg.Sessions.Hosting().Forget(id)
	if s.cfg.Lifecycle != nil {
		s.cfg.Lifecycle.EnvironmentDeleted(r.Context(), id)
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "environment_deleted"})
	return nil
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := s.cfg.Store.ListEnvironments(r.Context(), lq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}

func isConflict(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return false
	}
	return errors.Is(err, store.ErrConflict)
}
