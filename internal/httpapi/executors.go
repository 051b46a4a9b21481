package httpapi

import (
	"context"
	"net/http"

	ma "github.com/reinsdev/reins/managedagents"
)

// ExecutorLister lists the executors connected to this process; the
// app's executor hub is one (through an adapter: this package does not
// link the executor protocol).
type ExecutorLister interface {
	Executors(environmentID string) []ma.Executor
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
	page := ma.Page[ma.Executor]{Data: []ma.Executor{}}
	if x.list != nil {
		if l := x.list.Executors(env.ID); l != nil {
			page.Data = l
		}
	}
	writeJSON(w, page)
	return nil
}
