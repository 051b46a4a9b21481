package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/secret"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// maxMachineEnvironments bounds a machine's environment scope.
const maxMachineEnvironments = 100

// machineStore is what the machine endpoints keep in the database
// (the store is one).
type machineStore interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	CreateMachine(ctx context.Context, m store.Machine) error
	GetMachine(ctx context.Context, id string) (store.Machine, error)
	// ListMachines lists every machine, oldest first.
	ListMachines(ctx context.Context) ([]store.Machine, error)
	// RevokeMachine marks the machine's token revoked.
	RevokeMachine(ctx context.Context, id string, at time.Time) (store.Machine, error)
}

// machineRevocations is told when a machine's token is revoked
// (Lifecycle is one).
type machineRevocations interface {
	MachineRevoked(ctx context.Context, m store.Machine)
}

// machineAPI serves the machine endpoints.
type machineAPI struct {
	st machineStore
	// revoked, if not nil, is told when a machine is revoked.
	revoked machineRevocations
}

// machineRoutes registers the machine endpoints.
func (s *Server) machineRoutes() {
	m := &machineAPI{st: s.cfg.Store, revoked: s.cfg.Lifecycle}
	s.handle("POST /v1/machines", smallBody, m.createMachine)
	s.handle("GET /v1/machines", smallBody, m.listMachines)
	s.handle("GET /v1/machines/{id}", smallBody, m.getMachine)
	s.handle("POST /v1/machines/{id}/revoke", smallBody, noBody(m.revokeMachine))
}

// machine is a machine as listed (never its token).
type machine struct {
	Type           string   `json:"type"`
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	EnvironmentIDs []string `json:"environment_ids"`
	Hint           string   `json:"hint"`
	CreatedAt      string   `json:"created_at"`
	RevokedAt      *string  `json:"revoked_at"`
}

func machineView(m store.Machine) machine {
	return machine{Type: "machine", ID: m.ID, Name: m.Name, EnvironmentIDs: m.EnvironmentIDs, Hint: m.Hint,
		CreatedAt: ma.Time(m.CreatedAt), RevokedAt: ma.TimePtr(m.RevokedAt)}
}

// createMachine enrolls a machine: its token, in this response only, lets
// machine-scoped executors (processes, agent ends) serve sessions of the
// environments named in environment_ids. A cloud environment may be named:
// its sessions' turns may run on the machine's agent ends, while their
// tools stay in the server's sandboxes (the hub leases an environment's
// tools only to executors of the environment's own scope, never to a
// machine's).
func (mp *machineAPI) createMachine(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name           string   `json:"name"`
		EnvironmentIDs []string `json:"environment_ids"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Name == "" || len(body.Name) > 256 {
		return badRequest("name: required, at most 256 bytes")
	}
	if len(body.EnvironmentIDs) == 0 || len(body.EnvironmentIDs) > maxMachineEnvironments {
		return badRequest("environment_ids: between 1 and %d environments", maxMachineEnvironments)
	}
	envs := slices.Clone(body.EnvironmentIDs)
	slices.Sort(envs)
	envs = slices.Compact(envs)
	for _, id := range envs {
		env, err := mp.st.GetEnvironment(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			return badRequest("environment_ids: environment %s does not exist", id)
		}
		if err != nil {
			return err
		}
		if env.ArchivedAt != nil {
			return badRequest("environment_ids: environment %s is archived", id)
		}
	}
	token, hash := secret.New(secret.MachineTokenPrefix)
	m := store.Machine{ID: ids.New("mach_"), Name: body.Name, EnvironmentIDs: envs, Hash: hash, Hint: token[len(token)-4:], CreatedAt: time.Now().UTC()}
	if err := mp.st.CreateMachine(r.Context(), m); err != nil {
		return err
	}
	writeJSON(w, struct {
		machine
		Token string `json:"token"`
	}{machineView(m), token})
	return nil
}

func (mp *machineAPI) listMachines(w http.ResponseWriter, r *http.Request) error {
	ms, err := mp.st.ListMachines(r.Context())
	if err != nil {
		return err
	}
	page := ma.Page[machine]{Data: make([]machine, len(ms))}
	for i, m := range ms {
		page.Data[i] = machineView(m)
	}
	writeJSON(w, page)
	return nil
}

func (mp *machineAPI) getMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := mp.st.GetMachine(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, machineView(m))
	return nil
}

// revokeMachine revokes a machine's token: exchanges with it are refused
// from now on and the executors it connected are cut off.
func (mp *machineAPI) revokeMachine(w http.ResponseWriter, r *http.Request) error {
	m, err := mp.st.RevokeMachine(r.Context(), r.PathValue("id"), time.Now())
	if err != nil {
		return err
	}
	if mp.revoked != nil {
		mp.revoked.MachineRevoked(r.Context(), m)
	}
	writeJSON(w, machineView(m))
	return nil
}
