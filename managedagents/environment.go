package managedagents

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
