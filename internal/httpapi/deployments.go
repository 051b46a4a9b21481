package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/deployments"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Limits of a deployment.
const (
	maxDeploymentName        = 256
	maxDeploymentDescription = 2048
	maxDeploymentVaults      = 50
	upcomingRuns             = 5
)

// DeploymentScheduler fires the schedules of deployments;
// *deployments.Scheduler is one.
type DeploymentScheduler interface {
	// Wake tells the scheduler a deployment changed.
	Wake()
	// Now is the time by the scheduler's clock: a schedule set or
	// resumed counts from it.
	Now() time.Time
}

// deploymentRows is what the deployments endpoints need of the store.
type deploymentRows interface {
	store.Deployments
	GetVault(ctx context.Context, id string) (ma.Vault, error)
	GetMemoryStore(ctx context.Context, id string) (ma.MemoryStore, error)
	GetFile(ctx context.Context, id string) (store.File, error)
}

// deploymentAPI serves /v1/deployments and /v1/deployment_runs.
type deploymentAPI struct {
	s    *Server
	st   deploymentRows
	runs *deployments.Runs
}

// deploymentRoutes registers the ten deployments endpoints.
func (s *Server) deploymentRoutes() {
	d := &deploymentAPI{s: s, st: s.cfg.Store, runs: &deployments.Runs{Store: s.cfg.Store, Launcher: s}}
	for pattern, h := range map[string]handlerFunc{
		"POST /v1/deployments":              d.create,
		"GET /v1/deployments":               d.list,
		"GET /v1/deployments/{id}":          d.get,
		"POST /v1/deployments/{id}":         d.update,
		"POST /v1/deployments/{id}/archive": noBody(d.archive),
		"POST /v1/deployments/{id}/pause":   noBody(d.pause),
		"POST /v1/deployments/{id}/unpause": noBody(d.unpause),
		"POST /v1/deployments/{id}/run":     noBody(d.run),
		"GET /v1/deployment_runs":           d.listRuns,
		"GET /v1/deployment_runs/{id}":      d.getRun,
	} {
		s.handle(pattern, smallBody*4, h)
	}
}

// deploymentParams are the fields of a create or update, as sent.
type deploymentParams struct {
	Agent         json.RawMessage `json:"agent"`
	EnvironmentID json.RawMessage `json:"environment_id"`
	Name          json.RawMessage `json:"name"`
	InitialEvents json.RawMessage `json:"initial_events"`
	Description   json.RawMessage `json:"description"`
	Metadata      json.RawMessage `json:"metadata"`
	Resources     json.RawMessage `json:"resources"`
	VaultIDs      json.RawMessage `json:"vault_ids"`
	Schedule      json.RawMessage `json:"schedule"`
	Budget        json.RawMessage `json:"budget"`
}

// isNull tells a field sent as null.
func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

func (a *deploymentAPI) create(w http.ResponseWriter, r *http.Request) error {
	var p deploymentParams
	present, err := decodePresent(r, &p)
	if err != nil {
		return err
	}
	for _, f := range []string{"agent", "environment_id", "name", "initial_events"} {
		if _, ok := present[f]; !ok {
			return badRequest("%s: required", f)
		}
	}
	now := time.Now().Truncate(time.Microsecond)
	d := store.Deployment{Deployment: ma.Deployment{ID: ids.New(ids.Deployment), Type: "deployment", Resources: []ma.Raw{},
		VaultIDs: []string{}, Metadata: ma.Metadata{}, Status: ma.DeploymentActive, Budget: ma.Raw("null"),
		CreatedAt: ma.Time(now), UpdatedAt: ma.Time(now)}, Since: a.now()}
	if err := a.apply(r.Context(), &d, p, present, true); err != nil {
		return err
	}
	if err := a.st.CreateDeployment(r.Context(), d); err != nil {
		return err
	}
	a.changed()
	writeJSON(w, deploymentView(d.Deployment, a.now()))
	return nil
}

func (a *deploymentAPI) update(w http.ResponseWriter, r *http.Request) error {
	var p deploymentParams
	present, err := decodePresent(r, &p)
	if err != nil {
		return err
	}
	// The checks that read other objects run before the transaction.
	var next store.Deployment
	cur, err := a.st.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if cur.ArchivedAt != nil {
		return conflict("deployment %s is archived; it cannot be changed", cur.ID)
	}
	next = cur
	if err := a.apply(r.Context(), &next, p, present, false); err != nil {
		return err
	}
	d, err := a.st.UpdateDeployment(r.Context(), cur.ID, func(d *store.Deployment) error {
		if d.ArchivedAt != nil {
			return conflict("deployment %s is archived; it cannot be changed", d.ID)
		}
		lastRun := (*string)(nil)
		if d.Schedule != nil {
			lastRun = d.Schedule.LastRunAt
		}
		status, reason := d.Status, d.PausedReason
		*d = next
		d.Status, d.PausedReason = status, reason
		if d.Schedule != nil && lastRun != nil && d.Schedule.LastRunAt == nil {
			d.Schedule.LastRunAt = lastRun
		}
		d.UpdatedAt = ma.Time(time.Now())
		return nil
	})
	if err != nil {
		return err
	}
	a.changed()
	writeJSON(w, deploymentView(d.Deployment, a.now()))
	return nil
}

// apply sets the fields present in p on d, checking each by its rule;
// create tells a create (whose absent fields keep d's defaults).
func (a *deploymentAPI) apply(ctx context.Context, d *store.Deployment, p deploymentParams, present map[string]json.RawMessage, create bool) error {
	steps := []struct {
		field string
		set   func(context.Context, *store.Deployment, json.RawMessage) error
	}{
		{"agent", a.setAgent}, {"environment_id", a.setEnvironment}, {"name", setDeploymentName},
		{"initial_events", a.setInitialEvents}, {"description", setDescription}, {"metadata", nil},
		{"resources", a.setResources}, {"vault_ids", a.setVaults}, {"schedule", a.setSchedule}, {"budget", setBudget},
	}
	raws := map[string]json.RawMessage{"agent": p.Agent, "environment_id": p.EnvironmentID, "name": p.Name,
		"initial_events": p.InitialEvents, "description": p.Description, "metadata": p.Metadata, "resources": p.Resources,
		"vault_ids": p.VaultIDs, "schedule": p.Schedule, "budget": p.Budget}
	for _, st := range steps {
		if _, ok := present[st.field]; !ok {
			continue
		}
		raw := raws[st.field]
		if st.field == "metadata" {
			if err := setMetadata(d, raw, create); err != nil {
				return err
			}
			continue
		}
		if err := st.set(ctx, d, raw); err != nil {
			return err
		}
	}
	return nil
}

func (a *deploymentAPI) setAgent(ctx context.Context, d *store.Deployment, raw json.RawMessage) error {
	if isNull(raw) {
		return badRequest("agent: cannot be cleared")
	}
	var ref agentRef
	if err := decodeBytes(raw, &ref); err != nil {
		return fieldPrefix("agent: ", err)
	}
	if ref.Type != "agent" {
		return badRequest("agent.type: must be agent; got %q", ref.Type)
	}
	sa, err := a.s.resolveAgent(ctx, &ref)
	if err != nil {
		return err
	}
	d.Agent = ma.AgentReference{Type: "agent", ID: sa.ID, Version: sa.Version}
	return nil
}

func (a *deploymentAPI) setEnvironment(ctx context.Context, d *store.Deployment, raw json.RawMessage) error {
	var id string
	if isNull(raw) || json.Unmarshal(raw, &id) != nil || id == "" {
		return badRequest("environment_id: an environment id is required; it cannot be cleared")
	}
	env, err := a.s.cfg.Store.GetEnvironment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("environment_id: environment %s not found", id)
	}
	if err != nil {
		return err
	}
	if env.ArchivedAt != nil {
		return badRequest("environment_id: environment %s is archived", id)
	}
	d.EnvironmentID = id
	return nil
}

func setDeploymentName(_ context.Context, d *store.Deployment, raw json.RawMessage) error {
	var name string
	if isNull(raw) || json.Unmarshal(raw, &name) != nil || name == "" {
		return badRequest("name: a non-empty string is required; it cannot be cleared")
	}
	if n := len([]rune(name)); n > maxDeploymentName {
		return badRequest("name: at most %d characters, got %d", maxDeploymentName, n)
	}
	d.Name = name
	return nil
}

// setInitialEvents decodes the events by the rules of a session's
// initial events, and checks them by the sessions service's rule for a
// deployment's (which admits system.message).
func (a *deploymentAPI) setInitialEvents(ctx context.Context, d *store.Deployment, raw json.RawMessage) error {
	var raws []rawView
	if isNull(raw) || decodeBytes(raw, &raws) != nil {
		return badRequest("initial_events: an array of 1 to %d events is required; it cannot be cleared", sessions.MaxInitialEvents)
	}
	if len(raws) == 0 {
		return badRequest("initial_events: at least one event is required")
	}
	evs, err := a.s.initialEvents(ctx, raws)
	if err != nil {
		return err
	}
	if err := sessions.CheckInitial(evs, true); err != nil {
		return sessionError(err)
	}
	d.Initial = evs
	d.InitialEvents = make([]ma.Raw, len(raws))
	for i, r := range raws {
		d.InitialEvents[i] = ma.Raw(slices.Clone(r))
	}
	return nil
}

func setDescription(_ context.Context, d *store.Deployment, raw json.RawMessage) error {
	var desc string
	if !isNull(raw) {
		if err := json.Unmarshal(raw, &desc); err != nil {
			return badRequest("description: must be a string or null")
		}
	}
	if n := len([]rune(desc)); n > maxDeploymentDescription {
		return badRequest("description: at most %d characters, got %d", maxDeploymentDescription, n)
	}
	d.Description = nil
	if desc != "" {
		d.Description = &desc
	}
	return nil
}

// setMetadata sets the metadata of a create, or patches it on update
// (a null or empty value deletes its key).
func setMetadata(d *store.Deployment, raw json.RawMessage, create bool) error {
	var patch metadataPatch
	if !isNull(raw) {
		if err := decodeBytes(raw, &patch); err != nil {
			return fieldPrefix("metadata: ", err)
		}
	}
	cur := d.Metadata
	if create {
		cur = ma.Metadata{}
	}
	m := sessions.ApplyMetadata(cur, patch)
	if err := sessions.CheckMetadata("metadata", m); err != nil {
		return sessionError(err)
	}
	d.Metadata = m
	return nil
}

// setResources replaces the resources, checked by the sessions'
// resources rules; repository tokens are not kept by deployments.
func (a *deploymentAPI) setResources(ctx context.Context, d *store.Deployment, raw json.RawMessage) error {
	var raws []json.RawMessage
	if !isNull(raw) {
		if err := decodeBytes(raw, &raws); err != nil {
			return fieldPrefix("resources: ", err)
		}
	}
	out, tokens, err := a.s.decodeResources(ctx, raws)
	if err != nil {
		return err
	}
	if len(tokens) > 0 {
		return badRequest("resources: authorization_token is not supported on deployments by this server; use a vault credential for the repository's host instead")
	}
	d.Resources = out
	return nil
}

// setVaults replaces the vault_ids: each vault exists and is not
// archived.
func (a *deploymentAPI) setVaults(ctx context.Context, d *store.Deployment, raw json.RawMessage) error {
	var vaultIDs []string
	if !isNull(raw) {
		if err := decodeBytes(raw, &vaultIDs); err != nil {
			return fieldPrefix("vault_ids: ", err)
		}
	}
	if len(vaultIDs) > maxDeploymentVaults {
		return badRequest("vault_ids: at most %d vaults, got %d", maxDeploymentVaults, len(vaultIDs))
	}
	for i, id := range vaultIDs {
		v, err := a.st.GetVault(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("vault_ids[%d]: vault %s not found", i, id)
		}
		if err != nil {
			return err
		}
		if v.ArchivedAt != nil {
			return badRequest("vault_ids[%d]: vault %s is archived", i, id)
		}
	}
	if vaultIDs == nil {
		vaultIDs = []string{}
	}
	d.VaultIDs = vaultIDs
	return nil
}

// setSchedule replaces the schedule (null: manual runs only). A new
// schedule counts from now: instants before it are not fired.
func (a *deploymentAPI) setSchedule(_ context.Context, d *store.Deployment, raw json.RawMessage) error {
	if isNull(raw) {
		d.Schedule = nil
		return nil
	}
	var p struct {
		Type       string `json:"type"`
		Expression string `json:"expression"`
		Timezone   string `json:"timezone"`
	}
	if err := decodeBytes(raw, &p); err != nil {
		return fieldPrefix("schedule: ", err)
	}
	if p.Type != "cron" {
		return badRequest("schedule.type: must be cron; got %q", p.Type)
	}
	if _, err := deployments.ParseSchedule(p.Expression, p.Timezone); err != nil {
		return badRequest("schedule.%v", err)
	}
	next := &ma.Schedule{Type: "cron", Expression: p.Expression, Timezone: p.Timezone}
	if d.Schedule != nil {
		next.LastRunAt = d.Schedule.LastRunAt
	}
	if d.Schedule == nil || d.Schedule.Expression != p.Expression || d.Schedule.Timezone != p.Timezone {
		d.Since = a.now()
	}
	d.Schedule = next
	return nil
}

// setBudget replaces the budget ({type:"limit", max_list_cost:{amount,
// currency}}, by the sessions' rule; null: future sessions uncapped).
func setBudget(_ context.Context, d *store.Deployment, raw json.RawMessage) error {
	if isNull(raw) {
		d.Budget = ma.Raw("null")
		return nil
	}
	b, err := sessions.ParseBudget(raw)
	if err == nil {
		err = sessions.CheckBudget(b)
	}
	if err != nil {
		return err
	}
	out, err := json.Marshal(b)
	if err != nil {
		return err
	}
	d.Budget = out
	return nil
}

// now is the time by the scheduler's clock.
func (a *deploymentAPI) now() time.Time {
	if a.s.cfg.Deployments != nil {
		return a.s.cfg.Deployments.Now()
	}
	return time.Now()
}

// changed tells the scheduler a deployment changed.
func (a *deploymentAPI) changed() {
	if a.s.cfg.Deployments != nil {
		a.s.cfg.Deployments.Wake()
	}
}

// deploymentView is d as the API shows it at now: its schedule's next
// instants (none once archived).
func deploymentView(d ma.Deployment, now time.Time) ma.Deployment {
	if d.Schedule == nil {
		return d
	}
	sc := *d.Schedule
	sc.UpcomingRunsAt = []string{}
	if d.ArchivedAt == nil {
		if sched, err := deployments.ParseSchedule(sc.Expression, sc.Timezone); err == nil {
			for _, t := range sched.Upcoming(now, upcomingRuns) {
				sc.UpcomingRunsAt = append(sc.UpcomingRunsAt, ma.Time(t))
			}
		}
	}
	d.Schedule = &sc
	return d
}

func (a *deploymentAPI) get(w http.ResponseWriter, r *http.Request) error {
	d, err := a.st.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, deploymentView(d.Deployment, a.now()))
	return nil
}

func (a *deploymentAPI) list(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	q := query{r}
	dq := store.DeploymentQuery{ListQuery: lq, AgentID: q.str("agent_id")}
	if dq.Status, err = q.enum("status", "status", "", []string{ma.DeploymentActive, ma.DeploymentPaused}); err != nil {
		return err
	}
	if dq.Status != "" && q.str("include_archived") != "" {
		return badRequest("status: cannot be combined with include_archived")
	}
	items, err := a.st.ListDeployments(r.Context(), dq)
	if err != nil {
		return err
	}
	now := a.now()
	writePageOf(w, items, lq, order, func(d ma.Deployment) ma.Deployment { return deploymentView(d, now) })
	return nil
}

// setStatus changes the deployment unless it is archived, then tells the
// scheduler.
func (a *deploymentAPI) setStatus(w http.ResponseWriter, r *http.Request, fn func(d *store.Deployment)) error {
	d, err := a.st.UpdateDeployment(r.Context(), r.PathValue("id"), func(d *store.Deployment) error {
		if d.ArchivedAt != nil {
			return conflict("deployment %s is archived", d.ID)
		}
		fn(d)
		d.UpdatedAt = ma.Time(time.Now())
		return nil
	})
	if err != nil {
		return err
	}
	a.changed()
	writeJSON(w, deploymentView(d.Deployment, a.now()))
	return nil
}

func (a *deploymentAPI) pause(w http.ResponseWriter, r *http.Request) error {
	return a.setStatus(w, r, func(d *store.Deployment) {
		d.Status = ma.DeploymentPaused
		d.PausedReason = &ma.PausedReason{Type: "manual"}
	})
}

// unpause resumes the deployment: the instants missed while paused are
// not fired.
func (a *deploymentAPI) unpause(w http.ResponseWriter, r *http.Request) error {
	return a.setStatus(w, r, func(d *store.Deployment) {
		if d.Status == ma.DeploymentPaused {
			d.Since = a.now()
		}
		d.Status, d.PausedReason = ma.DeploymentActive, nil
	})
}

// archive archives the deployment (which then reports active, without a
// pause reason, and fires no more); archiving it again returns it.
func (a *deploymentAPI) archive(w http.ResponseWriter, r *http.Request) error {
	d, err := a.st.UpdateDeployment(r.Context(), r.PathValue("id"), func(d *store.Deployment) error {
		if d.ArchivedAt != nil {
			return nil
		}
		now := ma.Time(time.Now())
		d.ArchivedAt, d.UpdatedAt = &now, now
		d.Status, d.PausedReason = ma.DeploymentActive, nil
		return nil
	})
	if err != nil {
		return err
	}
	a.changed()
	writeJSON(w, deploymentView(d.Deployment, a.now()))
	return nil
}

// run runs the deployment now (a manual run, allowed while paused): the
// run records the session it created or why it created none.
func (a *deploymentAPI) run(w http.ResponseWriter, r *http.Request) error {
	d, err := a.st.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if d.ArchivedAt != nil {
		return conflict("deployment %s is archived; it cannot run", d.ID)
	}
	run, err := a.runs.Manual(r.Context(), d)
	if err != nil {
		return err
	}
	writeJSON(w, run)
	return nil
}

func (a *deploymentAPI) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := a.st.GetDeploymentRun(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, run)
	return nil
}

func (a *deploymentAPI) listRuns(w http.ResponseWriter, r *http.Request) error {
	lq, order, err := listQuery(r, "desc")
	if err != nil {
		return err
	}
	q := query{r}
	rq := store.DeploymentRunQuery{ListQuery: lq, DeploymentID: q.str("deployment_id")}
	if rq.TriggerType, err = q.enum("trigger_type", "trigger type", "", []string{ma.TriggerSchedule, ma.TriggerManual}); err != nil {
		return err
	}
	if q.str("has_error") != "" {
		v, err := q.boolean("has_error")
		if err != nil {
			return err
		}
		rq.HasError = &v
	}
	if rq.CreatedGT, err = q.time("created_at[gt]"); err != nil {
		return err
	}
	if rq.CreatedLT, err = q.time("created_at[lt]"); err != nil {
		return err
	}
	items, err := a.st.ListDeploymentRuns(r.Context(), rq)
	if err != nil {
		return err
	}
	writePage(w, items, lq, order)
	return nil
}
