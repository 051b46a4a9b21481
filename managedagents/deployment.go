package managedagents

// Deployment binds an agent, at a pinned version, to an environment,
// resources, vaults, initial events, an optional cron schedule and an
// optional budget; each run creates a fresh session from it.
type Deployment struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"` // "deployment"
	Name          string         `json:"name"`
	Description   *string        `json:"description"`
	Agent         AgentReference `json:"agent"`
	EnvironmentID string         `json:"environment_id"`
	// InitialEvents are the events each run's session starts with, as
	// the request gave them (user.message, user.define_outcome,
	// system.message).
	InitialEvents []Raw `json:"initial_events"`
	// Resources are session resources, echoed without write-only
	// fields.
	Resources []Raw     `json:"resources"`
	VaultIDs  []string  `json:"vault_ids"`
	Metadata  Metadata  `json:"metadata"`
	Schedule  *Schedule `json:"schedule"`
	// Status is DeploymentActive or DeploymentPaused (an archived
	// deployment reports active, with ArchivedAt).
	Status       string        `json:"status"`
	PausedReason *PausedReason `json:"paused_reason"`
	// Budget is the budget given at create or update ({type:"limit",
	// max_list_cost}), or null.
	Budget     Raw     `json:"budget"`
	CreatedAt  string  `json:"created_at"`
	UpdatedAt  string  `json:"updated_at"`
	ArchivedAt *string `json:"archived_at"`
}

// Deployment statuses.
const (
	DeploymentActive = "active"
	DeploymentPaused = "paused"
)

// AgentReference names an agent at one version.
type AgentReference struct {
	Type    string `json:"type"` // "agent"
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

// Schedule is a deployment's cron schedule.
type Schedule struct {
	Type       string `json:"type"` // "cron"
	Expression string `json:"expression"`
	Timezone   string `json:"timezone"`
	// LastRunAt is the instant of the last scheduled run (manual runs
	// leave it); nil before the first.
	LastRunAt *string `json:"last_run_at"`
	// UpcomingRunsAt are the next instants the schedule fires at
	// (computed when read; empty once archived).
	UpcomingRunsAt []string `json:"upcoming_runs_at"`
}

// PausedReason tells why a deployment is paused: {type:"manual"} or
// {type:"error", error:{type}}.
type PausedReason struct {
	Type  string     `json:"type"`
	Error *TypedItem `json:"error,omitempty"`
}

// TypedItem is an object that is its type only.
type TypedItem struct {
	Type string `json:"type"`
}

// DeploymentRun is the append-only record of one fire of a deployment:
// exactly one of SessionID and Error is set once the fire is done.
type DeploymentRun struct {
	ID             string              `json:"id"`
	Type           string              `json:"type"` // "deployment_run"
	DeploymentID   string              `json:"deployment_id"`
	Agent          AgentReference      `json:"agent"`
	TriggerContext TriggerContext      `json:"trigger_context"`
	SessionID      *string             `json:"session_id"`
	Error          *DeploymentRunError `json:"error"`
	CreatedAt      string              `json:"created_at"`
}

// TriggerContext is what fired a run: {type:"schedule", scheduled_at}
// or {type:"manual"}.
type TriggerContext struct {
	Type        string  `json:"type"`
	ScheduledAt *string `json:"scheduled_at,omitempty"`
}

// Trigger types.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// DeploymentRunError is why a run created no session.
type DeploymentRunError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
