// Package deployments fires deployments: each run of one records a
// DeploymentRun and creates a session through a Launcher. Runs records
// manual and scheduled runs; a Scheduler fires the cron schedules of
// every workspace's deployments at their instants, on every replica, the
// database's unique (deployment, scheduled instant) deciding which one
// records a fire.
package deployments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Run error types (besides the pausing ones of PausingErrors).
const (
	// ErrRejected: the session's validation refused it (not retryable).
	ErrRejected = "session_creation_rejected_error"
	// ErrRateLimited: too many sessions now; the schedule keeps firing.
	ErrRateLimited = "session_rate_limited_error"
	// ErrUnknown: something else failed (the server's log has what).
	ErrUnknown = "unknown_error"
)

// PausingErrors are the run errors that pause the deployment when a
// scheduled run fails with one: retrying would fail the same way.
var PausingErrors = []string{
	"environment_archived_error", "agent_archived_error", "environment_not_found_error",
	"vault_not_found_error", "vault_archived_error", "file_not_found_error",
	"memory_store_archived_error", "skill_not_found_error", "session_resource_not_found_error",
	"workspace_archived_error", "organization_disabled_error",
	"self_hosted_resources_unsupported_error", "mcp_egress_blocked_error", ErrUnknown,
}

// RunError is why a run created no session.
type RunError struct {
	Type, Message string
}

func (e *RunError) Error() string { return e.Message }

// Errorf returns a *RunError of type typ.
func Errorf(typ, format string, args ...any) error {
	return &RunError{Type: typ, Message: fmt.Sprintf(format, args...)}
}

// Launcher creates the session of the run runID of d (in d's
// workspace), with the deployment's pinned agent version, environment,
// resources, vaults, budget and initial events and its deployment_id,
// and returns its id. It records the run's session in the session's
// transaction (store.Tx.FinishDeploymentRun), so that a session exists
// if and only if its run names it. An error it can name is a *RunError;
// any other is an unknown_error.
type Launcher interface {
	Launch(ctx context.Context, d store.Deployment, runID string) (string, error)
}

// Store is what runs read and write of the store; a store.Store is one.
type Store interface {
	UpdateDeployment(ctx context.Context, id string, fn func(cur *store.Deployment) error) (store.Deployment, error)
	ScheduledDeployments(ctx context.Context) ([]store.Deployment, error)
	CreateDeploymentRun(ctx context.Context, r ma.DeploymentRun, fn func(cur *store.Deployment) error) error
	FinishDeploymentRun(ctx context.Context, id string, sessionID *string, runErr *ma.DeploymentRunError) (ma.DeploymentRun, error)
	AbandonDeploymentRuns(ctx context.Context, before time.Time, runErr ma.DeploymentRunError) ([]ma.DeploymentRun, error)
}

// Runs records the runs of deployments.
type Runs struct {
	Store    Store
	Launcher Launcher
}

// errStale: the deployment no longer fires that instant (paused,
// archived, its schedule changed or already past it).
var errStale = errors.New("deployments: the scheduled instant is no longer due")

// Manual runs d now, paused or not: a manual run.
func (r *Runs) Manual(ctx context.Context, d store.Deployment) (ma.DeploymentRun, error) {
	run := newRun(d, ma.TriggerContext{Type: ma.TriggerManual})
	if err := r.Store.CreateDeploymentRun(ctx, run, nil); err != nil {
		return run, err
	}
	run, _, err := r.launch(ctx, d, run)
	return run, err
}

// Scheduled fires d's schedule instant at: it records the run unless the
// deployment has one for at already (store.ErrConflict: another replica
// fired it) or no longer fires at (errStale), sets the schedule's
// last_run_at, and creates the session. A failure with one of
// PausingErrors pauses the deployment.
func (r *Runs) Scheduled(ctx context.Context, d store.Deployment, at time.Time) (ma.DeploymentRun, error) {
	ctx = store.WithWorkspace(ctx, d.WorkspaceID) // the scheduler's context has none
	stamp := ma.Time(at)
	run := newRun(d, ma.TriggerContext{Type: ma.TriggerSchedule, ScheduledAt: &stamp})
	expr := *d.Schedule
	err := r.Store.CreateDeploymentRun(ctx, run, func(cur *store.Deployment) error {
		if cur.Schedule == nil || cur.Status != ma.DeploymentActive || cur.ArchivedAt != nil ||
			cur.Schedule.Expression != expr.Expression || cur.Schedule.Timezone != expr.Timezone || !at.After(sinceOf(*cur)) {
			return errStale
		}
		cur.Schedule.LastRunAt = &stamp
		d = *cur
		return nil
	})
	if err != nil {
		return run, err
	}
	run, runErr, err := r.launch(ctx, d, run)
	if err != nil || runErr == nil || !slices.Contains(PausingErrors, runErr.Type) {
		return run, err
	}
	_, err = r.Store.UpdateDeployment(ctx, d.ID, func(cur *store.Deployment) error {
		if cur.Status != ma.DeploymentActive || cur.ArchivedAt != nil {
			return nil
		}
		cur.Status = ma.DeploymentPaused
		cur.PausedReason = &ma.PausedReason{Type: "error", Error: &ma.TypedItem{Type: runErr.Type}}
		cur.UpdatedAt = ma.Time(time.Now())
		return nil
	})
	return run, err
}

// launch creates the run's session, which records itself on the run, or
// records the run's error.
func (r *Runs) launch(ctx context.Context, d store.Deployment, run ma.DeploymentRun) (ma.DeploymentRun, *ma.DeploymentRunError, error) {
	ctx = store.WithWorkspace(ctx, d.WorkspaceID)
	id, err := r.Launcher.Launch(ctx, d, run.ID)
	if err == nil {
		run.SessionID = &id
		return run, nil, nil
	}
	var re *RunError
	if !errors.As(err, &re) {
		re = &RunError{Type: ErrUnknown, Message: "the session could not be created: " + err.Error()}
	}
	runErr := &ma.DeploymentRunError{Type: re.Type, Message: re.Message}
	out, err := r.Store.FinishDeploymentRun(context.WithoutCancel(ctx), run.ID, nil, runErr)
	if errors.Is(err, store.ErrConflict) && (out.SessionID != nil || out.Error != nil) {
		// The run has its outcome already: its session committed before
		// a later step failed, or AbandonStale recorded it (which does
		// not pause).
		return out, nil, nil
	}
	return out, runErr, err
}

// Abandoned is the error of a run its server stopped before its session
// was created: AbandonStale records it.
const Abandoned = "the server stopped before this run's session was created; no session was created"

// AbandonStale records an unknown_error on the runs still pending that
// were created before before: their server stopped between recording
// the run and creating its session (a run whose session was created
// names it, in the same transaction). It does not pause their
// deployments: the next fire may well succeed.
func (r *Runs) AbandonStale(ctx context.Context, before time.Time) ([]ma.DeploymentRun, error) {
	return r.Store.AbandonDeploymentRuns(ctx, before, ma.DeploymentRunError{Type: ErrUnknown, Message: Abandoned})
}

// newRun is a run of d with its agent as it is now.
func newRun(d store.Deployment, trigger ma.TriggerContext) ma.DeploymentRun {
	return ma.DeploymentRun{ID: ids.New(ids.DeploymentRun), Type: "deployment_run", DeploymentID: d.ID, Agent: d.Agent,
		TriggerContext: trigger, CreatedAt: ma.Time(time.Now())}
}

// sinceOf is the instant after which d's schedule fires: the later of
// when it was set or resumed and its last run.
func sinceOf(d store.Deployment) time.Time {
	since := d.Since
	if d.Schedule != nil && d.Schedule.LastRunAt != nil {
		if t, err := time.Parse(time.RFC3339Nano, *d.Schedule.LastRunAt); err == nil && t.After(since) {
			since = t
		}
	}
	return since
}
