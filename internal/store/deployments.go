package store

import (
	"context"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Deployments stores deployments and their runs. Both are scoped to ctx's
// workspace (WithWorkspace), but ScheduledDeployments, which serves every
// workspace.
type Deployments interface {
	// CreateDeployment stores a new deployment in ctx's workspace.
	CreateDeployment(ctx context.Context, d Deployment) error
	// GetDeployment returns a deployment, archived or not.
	GetDeployment(ctx context.Context, id string) (Deployment, error)
	// UpdateDeployment reads the deployment, calls fn and writes it
	// back, atomically. An error from fn is returned as is.
	UpdateDeployment(ctx context.Context, id string, fn func(cur *Deployment) error) (Deployment, error)
	// ListDeployments lists deployments in creation order (q.Desc:
	// newest first) with q's filters.
	ListDeployments(ctx context.Context, q DeploymentQuery) ([]Item[ma.Deployment], error)
	// ScheduledDeployments returns the deployments of every workspace
	// that have a schedule, are active and not archived: those a
	// scheduler fires.
	ScheduledDeployments(ctx context.Context) ([]Deployment, error)
	// CreateDeploymentRun records a run of the deployment r.DeploymentID
	// and, in the same transaction, calls fn on the deployment and
	// writes it back (fn may be nil; an error from it is returned as
	// is and nothing is written). A scheduled run is refused with
	// ErrConflict when the deployment has a run for its scheduled_at
	// already: a database constraint, so that of several replicas that
	// fire the same instant one records it.
	CreateDeploymentRun(ctx context.Context, r ma.DeploymentRun, fn func(cur *Deployment) error) error
	// FinishDeploymentRun records the outcome of a pending run (one
	// recorded with neither a session nor an error): the session it
	// created or its error. A run that has its outcome already is an
	// ErrConflict. A run that created a session is finished in the
	// session's transaction instead (Tx.FinishDeploymentRun).
	FinishDeploymentRun(ctx context.Context, id string, sessionID *string, runErr *ma.DeploymentRunError) (ma.DeploymentRun, error)
	// AbandonDeploymentRuns records runErr as the outcome of every run
	// of every workspace still pending that was created before before
	// (its server stopped before its session was created), each in its
	// own transaction, and returns them. A run whose session commits
	// meanwhile keeps its session: one of the two outcomes wins.
	AbandonDeploymentRuns(ctx context.Context, before time.Time, runErr ma.DeploymentRunError) ([]ma.DeploymentRun, error)
	GetDeploymentRun(ctx context.Context, id string) (ma.DeploymentRun, error)
	// ListDeploymentRuns lists runs in creation order (q.Desc: newest
	// first) with q's filters.
	ListDeploymentRuns(ctx context.Context, q DeploymentRunQuery) ([]Item[ma.DeploymentRun], error)
}

// Deployment is a stored deployment.
type Deployment struct {
	ma.Deployment
	// WorkspaceID is the deployment's workspace; CreateDeployment sets it
	// from ctx.
	WorkspaceID string
	// Initial are the initial events decoded and checked, as each run's
	// session receives them.
	Initial []ma.Event
	// Since is when the schedule was last set or resumed (create, a new
	// schedule, unpause): the schedule fires only instants after it (and
	// after its last run).
	Since time.Time
}

// DeploymentQuery adds the deployments list's filters to ListQuery.
type DeploymentQuery struct {
	ListQuery
	AgentID string
	// Status keeps the deployments of that status ("" for all); it
	// excludes archived ones.
	Status string
}

// DeploymentRunQuery adds the runs list's filters to ListQuery.
type DeploymentRunQuery struct {
	ListQuery
	DeploymentID string
	// TriggerType keeps the runs of that trigger ("" for all).
	TriggerType string
	// HasError keeps the runs with (true) or without (false) an error.
	HasError             *bool
	CreatedGT, CreatedLT *time.Time
}
