package httpapi

import (
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

// listExecutors serves GET /v1/environments/{id}/executors: the
// executors connected to this process for a self-hosted environment.
// With replicas, each process lists its own connections.
func (s *Server) listExecutors(w http.ResponseWriter, r *http.Request) error {
	env, err := s.cfg.Store.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return badRequest("%v", err)
	}
	page := ma.Page[ExecutorView]{Data: []ExecutorView{}}
	if s.cfg.ExecutorList != nil {
		if l := s.cfg.ExecutorList.Executors(env.ID); l != nil {
			page.Data = l
		}
	}
	writeJSON(w, page)
	return nil
}
