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

// environmentStore is what the environment endpoints keep in the
// database (the store is one).
type environmentStore interface {
	// CreateEnvironment stores a new environment, and the outcome of
	// ctx's WithOutcome, if any, in the same transaction.
	CreateEnvironment(ctx context.Context, e ma.Environment) error
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	// UpdateEnvironment reads the environment, calls fn and writes it
	// back, atomically.
	UpdateEnvironment(ctx context.Context, id string, fn func(*ma.Environment) error) (ma.Environment, error)
	DeleteEnvironment(ctx context.Context, id string) error
	ListEnvironments(ctx context.Context, q store.ListQuery) ([]store.Item[ma.Environment], error)
}

// environmentEnds is told when an environment ends (Lifecycle is one).
type environmentEnds interface {
	EnvironmentDeleted(ctx context.Context, id string)
	EnvironmentArchived(ctx context.Context, id string)
}

// hostingRule forgets what it knows of an environment
// (*sessions.Hosting is one).
type hostingRule interface {
	Forget(envID string)
}

// environmentAPI serves the environment endpoints.
type environmentAPI struct {
	*keeper
	st      environmentStore
	hosting hostingRule
	// ends, if not nil, is told when environments end.
	ends environmentEnds
	// validatePackages, if set, checks config.packages.
	validatePackages func(*ma.Packages) error
}

// environmentRoutes registers the environment endpoints.
func (s *Server) environmentRoutes() {
	en := &environmentAPI{keeper: s.keeper, st: s.cfg.Store, hosting: s.cfg.Sessions.Hosting(), ends: s.cfg.Lifecycle,
		validatePackages: s.cfg.ValidatePackages}
	s.handle("POST /v1/environments", smallBody, en.createEnvironment)
	s.handle("GET /v1/environments", smallBody, en.listEnvironments)
	s.handle("GET /v1/environments/{id}", smallBody, en.getEnvironment)
	s.handle("POST /v1/environments/{id}", smallBody, en.updateEnvironment)
	s.handle("POST /v1/environments/{id}/archive", smallBody, noBody(en.archiveEnvironment))
	s.handle("DELETE /v1/environments/{id}", smallBody, noBody(en.deleteEnvironment))
}

// resolveEnvConfig validates an environment config and fills its
// defaults.
func (en *environmentAPI) resolveEnvConfig(p *configParam) (ma.EnvironmentConfig, error) {
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
		if v := en.validatePackages; v != nil {
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
func (en *environmentAPI) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	idem, err := en.idempotency(r)
	if err != nil {
		return err
	}
	var p environmentCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	if done, err := en.replayOutcome(w, r, idem); done || err != nil {
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
	cfg, err := en.resolveEnvConfig(p.Config)
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
	return en.createKept(w, r, idem, e, func(ctx context.Context) error {
		err := en.st.CreateEnvironment(ctx, e)
		if isConflict(err) {
			return conflict("name: an environment named %q already exists", *p.Name)
		}
		return err
	})
}

func (en *environmentAPI) getEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := en.st.GetEnvironment(r.Context(), r.PathValue("id"))
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

func (en *environmentAPI) updateEnvironment(w http.ResponseWriter, r *http.Request) error {
	var p environmentUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	e, err := en.st.UpdateEnvironment(r.Context(), r.PathValue("id"), func(cur *ma.Environment) error {
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
			cfg, err := en.resolveEnvConfig(p.Config)
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

func (en *environmentAPI) archiveEnvironment(w http.ResponseWriter, r *http.Request) error {
	e, err := en.st.UpdateEnvironment(r.Context(), r.PathValue("id"), func(cur *ma.Environment) error {
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
	if en.ends != nil {
		en.ends.EnvironmentArchived(r.Context(), e.ID)
	}
	writeJSON(w, e)
	return nil
}

func (en *environmentAPI) deleteEnvironment(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := en.st.DeleteEnvironment(r.Context(), id); err != nil {
		return err
	}
	en.hosting.Forget(id)
	if en.ends != nil {
		en.ends.EnvironmentDeleted(r.Context(), id)
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "environment_deleted"})
	return nil
}

func (en *environmentAPI) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := en.st.ListEnvironments(r.Context(), lq)
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
