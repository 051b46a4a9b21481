package httpapi

import (
	"context"
	"net/http"

	ma "github.com/reinsdev/reins/managedagents"
)

// ExecutorView is an executor connected to this process, as
// GET /v1/environments/{id}/executors shows it (a reins extension, read
// by the console).
type ExecutorView struct {
	Type          string   `json:"type"`
	ID            string   `json:"id"`
	EnvironmentID string   `json:"environment_id"`
	MachineID     string   `json:"machine_id"`
	Name          string   `json:"name"`
	Version       string   `json:"version,omitempty"`
	OS            string   `json:"os,omitempty"`
	Arch          string   `json:"arch,omitempty"`
	Hostname      string   `json:"hostname,omitempty"`
	Capabilities  []string `json:"capabilities"`
	MaxSessions   int      `json:"max_sessions"`
	// Sessions are the sessions the executor holds a lease on.
	Sessions []string `json:"sessions"`
}

// ExecutorLister lists the executors connected to this process; the
// app's executor hub is one (through an adapter: this package does not
// link the executor protocol).
type ExecutorLister interface {
	Executors(environmentID string) []ExecutorView
}

// environmentReader reads environments (the store is one).
type environmentReader interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
}

// executorAPI serves the list of an environment's executors.
type executorAPI struct {
	st environmentReader
	// list, if not nil, lists the executors connected to this process.
	list ExecutorLister
}

// executorRoutes registers the executor list.
func (s *Server) executorRoutes() {
	x := &executorAPI{st: s.cfg.Store, list: s.cfg.ExecutorList}
	s.handle("GET /v1/environments/{id}/executors", smallBody, x.listExecutors)
}

// listExecutors serves GET /v1/environments/{id}/executors: the
// executors connected to this process for a self-hosted environment.
// With replicas, each process lists its own connections.
func (x *executorAPI) listExecutors(w http.ResponseWriter, r *http.Request) error {
	env, err := x.st.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return badRequest("%v", err)
	}
	page := ma.Page[ExecutorView]{Data: []ExecutorView{}}
	if x.list != nil {
		if l := x.list.Executors(env.ID); l != nil {
			page.Data = l
		}
	}
	writeJSON(w, page)
	return nil
}
