package managedagents

import "fmt"

// Environment is where an agent's tools run.
type Environment struct {
	ID          string            `json:"id"`
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Config      EnvironmentConfig `json:"config"`
	Metadata    Metadata          `json:"metadata"`
	Scope       *string           `json:"scope"`
	CreatedAt   string            `json:"created_at"`
	UpdatedAt   string            `json:"updated_at"`
	ArchivedAt  *string           `json:"archived_at"`
}

// EnvironmentConfig is {"type":"cloud",networking,packages} or
// {"type":"self_hosted"}.
type EnvironmentConfig struct {
	Type       string      `json:"type"`
	Networking *Networking `json:"networking,omitempty"`
	Packages   *Packages   `json:"packages,omitempty"`
}

// Environment config types.
const (
	EnvCloud      = "cloud"
	EnvSelfHosted = "self_hosted"
)

// CheckOutsideExecutors says whether parties outside the server may run
// the environment's tools: hold its environment keys, get executor tokens
// for it, register executors in it, poll its work queue and post its
// sessions' tool results. Only a self_hosted environment allows that; a
// cloud environment's tools run on the server's own sandboxes, which are
// given its sessions' credentials, so nobody else may serve its sessions.
// It returns nil or a *[NotSelfHostedError]. Every such check goes
// through it.
func (e *Environment) CheckOutsideExecutors() error {
	if e.Config.Type == EnvSelfHosted {
		return nil
	}
	return &NotSelfHostedError{EnvironmentID: e.ID, Type: e.Config.Type}
}

// NotSelfHostedError is the refusal of [Environment.CheckOutsideExecutors]:
// the environment is not self_hosted.
type NotSelfHostedError struct {
	EnvironmentID string
	// Type is the environment's config type (cloud).
	Type string
}

func (e *NotSelfHostedError) Error() string {
	return fmt.Sprintf("environment %s is a %s environment: its tools run on the server's own sandboxes, "+
		"which need no environment key, executor or work queue; create a self_hosted environment to run tools on your machines",
		e.EnvironmentID, e.Type)
}

// Networking is an environment's network policy.
type Networking struct {
	Type                 string   `json:"type"`
	AllowedHosts         []string `json:"allowed_hosts,omitempty"`
	AllowPackageManagers *bool    `json:"allow_package_managers,omitempty"`
	AllowMCPServers      *bool    `json:"allow_mcp_servers,omitempty"`
}

// Packages lists the packages installed in a cloud environment.
type Packages struct {
	Type  string   `json:"type"`
	Apt   []string `json:"apt"`
	Cargo []string `json:"cargo"`
	Gem   []string `json:"gem"`
	Go    []string `json:"go"`
	Npm   []string `json:"npm"`
	Pip   []string `json:"pip"`
}
