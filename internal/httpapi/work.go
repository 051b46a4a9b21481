package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/workqueue"
	ma "github.com/reinsdev/reins/managedagents"
)

// WorkQueue runs the work queues of self-hosted environments for their
// pull workers; *workqueue.Service is one.
type WorkQueue interface {
	// Poll claims the oldest claimable item of the environment for
	// worker, waiting up to block, with the secret of this hand-out, tied
	// to the environment key keyID that polls ("" for another
	// credential); nil when there is none.
	Poll(ctx context.Context, envID, worker, keyID string, block, reclaim time.Duration) (*workqueue.Claim, error)
	Ack(ctx context.Context, envID, id string) (store.WorkItem, error)
	Heartbeat(ctx context.Context, envID, id, expected string, desiredTTL time.Duration) (workqueue.HeartbeatResult, error)
	Stop(ctx context.Context, envID, id string, force bool) (store.WorkItem, error)
	// Stats counts the environment's queue and the workers polling it.
	Stats(ctx context.Context, envID string) (store.WorkStats, int, error)
}

// workStore is what the work endpoints read and change in the database
// themselves (the store is one).
type workStore interface {
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	GetWork(ctx context.Context, environmentID, id string) (store.WorkItem, error)
	ListWork(ctx context.Context, environmentID string, q store.ListQuery) ([]store.Item[store.WorkItem], error)
	// UpdateWork changes an item in one transaction.
	UpdateWork(ctx context.Context, environmentID, id string, fn func(*store.WorkItem) error) (store.WorkItem, error)
}

// workAPI serves the work queue endpoints of self-hosted environments.
type workAPI struct {
	st workStore
	// queue is nil when the server runs no work queues.
	queue WorkQueue
}

// workRoutes registers the work queue endpoints.
func (s *Server) workRoutes() {
	wq := &workAPI{st: s.cfg.Store, queue: s.cfg.Work}
	s.handle("GET /v1/environments/{id}/work/poll", smallBody, wq.pollWork)
	s.handle("GET /v1/environments/{id}/work/stats", smallBody, wq.workStats)
	s.handle("GET /v1/environments/{id}/work", smallBody, wq.listWork)
	s.handle("GET /v1/environments/{id}/work/{work_id}", smallBody, wq.getWork)
	s.handle("POST /v1/environments/{id}/work/{work_id}", smallBody, wq.updateWork)
	s.handle("POST /v1/environments/{id}/work/{work_id}/ack", smallBody, noBody(wq.ackWork))
	s.handle("POST /v1/environments/{id}/work/{work_id}/heartbeat", smallBody, noBody(wq.heartbeatWork))
	s.handle("POST /v1/environments/{id}/work/{work_id}/stop", smallBody, wq.stopWork)
}

// work is the wire form of a work item.
type work struct {
	ID                string            `json:"id"`
	Type              string            `json:"type"`
	EnvironmentID     string            `json:"environment_id"`
	Data              workData          `json:"data"`
	State             string            `json:"state"`
	Metadata          map[string]string `json:"metadata"`
	Secret            *string           `json:"secret"`
	CreatedAt         string            `json:"created_at"`
	AcknowledgedAt    *string           `json:"acknowledged_at"`
	StartedAt         *string           `json:"started_at"`
	LatestHeartbeatAt *string           `json:"latest_heartbeat_at"`
	StopRequestedAt   *string           `json:"stop_requested_at"`
	StoppedAt         *string           `json:"stopped_at"`
}

type workData struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func workView(w store.WorkItem) work {
	meta := w.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return work{ID: w.ID, Type: "work", EnvironmentID: w.EnvironmentID, Data: workData{Type: "session", ID: w.SessionID},
		State: w.State, Metadata: meta, CreatedAt: ma.Time(w.CreatedAt), AcknowledgedAt: ma.TimePtr(w.AcknowledgedAt),
		StartedAt: ma.TimePtr(w.StartedAt), LatestHeartbeatAt: ma.TimePtr(w.LatestHeartbeatAt),
		StopRequestedAt: ma.TimePtr(w.StopRequestedAt), StoppedAt: ma.TimePtr(w.StoppedAt)}
}

// workEnv checks that the path's environment exists and is self-hosted.
func (wq *workAPI) workEnv(r *http.Request) (ma.Environment, error) {
	if wq.queue == nil {
		return ma.Environment{}, notFound("work queues are not enabled on this server")
	}
	env, err := wq.st.GetEnvironment(r.Context(), r.PathValue("id"))
	if err != nil {
		return env, err
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return env, badRequest("%v", err)
	}
	return env, nil
}

func workError(err error) error {
	var hm *workqueue.HeartbeatMismatch
	switch {
	case errors.As(err, &hm):
		return &apiError{status: http.StatusPreconditionFailed, typ: ma.ErrInvalidRequest, message: hm.Error(), noRetry: true,
			details: map[string]any{"current_state": map[string]any{"state": hm.State, "ttl_seconds": hm.TTLSeconds, "last_heartbeat": hm.LastHeartbeat}}}
	case errors.Is(err, workqueue.ErrConflict):
		return conflict("%s", strings.TrimPrefix(err.Error(), workqueue.ErrConflict.Error()+": "))
	}
	return err
}

func (wq *workAPI) pollWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	q := query{r}
	var block time.Duration
	if v := q.str("block_ms"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 999 {
			return badRequest("block_ms: must be an integer from 1 to 999 (omit it for a non-blocking poll); got %q", v)
		}
		block = time.Duration(n) * time.Millisecond
	}
	reclaim := workqueue.DefaultReclaim
	if v := q.str("reclaim_older_than_ms"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest("reclaim_older_than_ms: must be a non-negative integer; got %q", v)
		}
		reclaim = time.Duration(n) * time.Millisecond
	}
	item, err := wq.queue.Poll(r.Context(), env.ID, r.Header.Get("Anthropic-Worker-ID"), principal(r).EnvironmentKeyID, block, reclaim)
	if err != nil {
		return err
	}
	if item == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("null\n"))
		return nil
	}
	// The secret is the poll's alone: the item's other views leave it
	// null.
	view := workView(item.WorkItem)
	view.Secret = &item.Secret
	writeJSON(w, view)
	return nil
}

func (wq *workAPI) ackWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	item, err := wq.queue.Ack(r.Context(), env.ID, r.PathValue("work_id"))
	if err != nil {
		return workError(err)
	}
	writeJSON(w, workView(item))
	return nil
}

func (wq *workAPI) heartbeatWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	q := query{r}
	expected := q.str("expected_last_heartbeat")
	if expected == "" {
		return badRequest("expected_last_heartbeat: required (%s for the first heartbeat)", workqueue.NoHeartbeat)
	}
	var ttl time.Duration
	if v := q.str("desired_ttl_seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("desired_ttl_seconds: must be a positive integer; got %q", v)
		}
		ttl = time.Duration(n) * time.Second
	}
	res, err := wq.queue.Heartbeat(r.Context(), env.ID, r.PathValue("work_id"), expected, ttl)
	if err != nil {
		return workError(err)
	}
	writeJSON(w, map[string]any{"type": "work_heartbeat", "last_heartbeat": res.LastHeartbeat, "lease_extended": res.LeaseExtended,
		"state": res.State, "ttl_seconds": res.TTLSeconds})
	return nil
}

func (wq *workAPI) stopWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	var body struct {
		Force bool `json:"force"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	item, err := wq.queue.Stop(r.Context(), env.ID, r.PathValue("work_id"), body.Force)
	if err != nil {
		return workError(err)
	}
	writeJSON(w, workView(item))
	return nil
}

func (wq *workAPI) getWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	item, err := wq.st.GetWork(r.Context(), env.ID, r.PathValue("work_id"))
	if err != nil {
		return err
	}
	writeJSON(w, workView(item))
	return nil
}

func (wq *workAPI) updateWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	var body struct {
		Metadata metadataPatch `json:"metadata"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	item, err := wq.st.UpdateWork(r.Context(), env.ID, r.PathValue("work_id"), func(it *store.WorkItem) error {
		next := applyMetadata(it.Metadata, body.Metadata)
		if err := validateMetadata("metadata", next); err != nil {
			return err
		}
		it.Metadata = next
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, workView(item))
	return nil
}

func (wq *workAPI) listWork(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	items, err := wq.st.ListWork(r.Context(), env.ID, lq)
	if err != nil {
		return err
	}
	writePageOf(w, items, lq, order, workView)
	return nil
}

func (wq *workAPI) workStats(w http.ResponseWriter, r *http.Request) error {
	env, err := wq.workEnv(r)
	if err != nil {
		return err
	}
	st, polling, err := wq.queue.Stats(r.Context(), env.ID)
	if err != nil {
		return err
	}
	writeJSON(w, map[string]any{"type": "work_queue_stats", "depth": st.Depth, "pending": st.Pending,
		"oldest_queued_at": ma.TimePtr(st.OldestQueuedAt), "workers_polling": polling})
	return nil
}
