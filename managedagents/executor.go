package managedagents

// Executor is an executor connected to a reins server process, as
// GET /v1/environments/{id}/executors shows it (a reins extension, read
// by the console).
type Executor struct {
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
