package managedagents

import "encoding/json"

// Vault holds credentials that sessions name in vault_ids.
type Vault struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	DisplayName string   `json:"display_name"`
	Metadata    Metadata `json:"metadata"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
	ArchivedAt  *string  `json:"archived_at"`
}

// Credential is a vault credential as the API returns it: never with its
// secrets.
type Credential struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	VaultID     string         `json:"vault_id"`
	DisplayName *string        `json:"display_name"`
	Metadata    Metadata       `json:"metadata"`
	Auth        CredentialAuth `json:"auth"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
	ArchivedAt  *string        `json:"archived_at"`
}

// Credential kinds (auth.type).
const (
	AuthMCPOAuth     = "mcp_oauth"
	AuthStaticBearer = "static_bearer"
	AuthEnvVar       = "environment_variable"
)

// CredentialAuth is the non-secret part of a credential's auth, a union on
// Type. It marshals to exactly the fields of its kind.
type CredentialAuth struct {
	Type string
	// MCPServerURL: mcp_oauth and static_bearer (immutable).
	MCPServerURL string
	// ExpiresAt and Refresh: mcp_oauth (both nullable).
	ExpiresAt *string
	Refresh   *OAuthRefresh
	// SecretName, Networking and InjectionLocation: environment_variable.
	SecretName        string
	Networking        *CredentialNetworking
	InjectionLocation *InjectionLocation
}

// OAuthRefresh is an mcp_oauth refresh configuration without its secrets.
type OAuthRefresh struct {
	ClientID          string            `json:"client_id"`
	TokenEndpoint     string            `json:"token_endpoint"`
	TokenEndpointAuth TokenEndpointAuth `json:"token_endpoint_auth"`
	Resource          *string           `json:"resource"`
	Scope             *string           `json:"scope"`
}

// TokenEndpointAuth is how a refresh authenticates to the token endpoint:
// none, client_secret_basic or client_secret_post (the secret is sealed).
type TokenEndpointAuth struct {
	Type string `json:"type"`
}

// CredentialNetworking is {"type":"unrestricted"} or
// {"type":"limited","allowed_hosts":[…]}.
type CredentialNetworking struct {
	Type         string   `json:"type"`
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// InjectionLocation says where an environment_variable secret may be
// substituted in outbound requests.
type InjectionLocation struct {
	Body   bool `json:"body"`
	Header bool `json:"header"`
}

type (
	oauthJSON struct {
		Type         string        `json:"type"`
		MCPServerURL string        `json:"mcp_server_url"`
		ExpiresAt    *string       `json:"expires_at"`
		Refresh      *OAuthRefresh `json:"refresh"`
	}
	bearerJSON struct {
		Type         string `json:"type"`
		MCPServerURL string `json:"mcp_server_url"`
	}
	envJSON struct {
		Type              string                `json:"type"`
		SecretName        string                `json:"secret_name"`
		Networking        *CredentialNetworking `json:"networking"`
		InjectionLocation *InjectionLocation    `json:"injection_location"`
	}
)

// MarshalJSON writes the fields of a's kind.
func (a CredentialAuth) MarshalJSON() ([]byte, error) {
	switch a.Type {
	case AuthMCPOAuth:
		return json.Marshal(oauthJSON{a.Type, a.MCPServerURL, a.ExpiresAt, a.Refresh})
	case AuthStaticBearer:
		return json.Marshal(bearerJSON{a.Type, a.MCPServerURL})
	default:
		n := a.Networking
		if n != nil && n.Type == "limited" && n.AllowedHosts == nil {
			nn := *n
			nn.AllowedHosts = []string{}
			n = &nn
		}
		loc := a.InjectionLocation
		if loc == nil {
			loc = &InjectionLocation{}
		}
		return json.Marshal(envJSON{a.Type, a.SecretName, n, loc})
	}
}

// UnmarshalJSON reads any kind.
func (a *CredentialAuth) UnmarshalJSON(b []byte) error {
	var v struct {
		Type              string                `json:"type"`
		MCPServerURL      string                `json:"mcp_server_url"`
		ExpiresAt         *string               `json:"expires_at"`
		Refresh           *OAuthRefresh         `json:"refresh"`
		SecretName        string                `json:"secret_name"`
		Networking        *CredentialNetworking `json:"networking"`
		InjectionLocation *InjectionLocation    `json:"injection_location"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = CredentialAuth{Type: v.Type, MCPServerURL: v.MCPServerURL, ExpiresAt: v.ExpiresAt, Refresh: v.Refresh,
		SecretName: v.SecretName, Networking: v.Networking, InjectionLocation: v.InjectionLocation}
	return nil
}

// CredentialValidation is the answer of mcp_oauth_validate.
type CredentialValidation struct {
	Type            string          `json:"type"`
	CredentialID    string          `json:"credential_id"`
	VaultID         string          `json:"vault_id"`
	Status          string          `json:"status"`
	HasRefreshToken bool            `json:"has_refresh_token"`
	MCPProbe        *MCPProbe       `json:"mcp_probe"`
	Refresh         *RefreshAttempt `json:"refresh"`
	ValidatedAt     string          `json:"validated_at"`
}

// MCPProbe is the failing step of a validation probe.
type MCPProbe struct {
	Method       string        `json:"method"`
	HTTPResponse *HTTPResponse `json:"http_response"`
	// Message says why the server could not be reached (no
	// http_response): unreachable, or an address reins refuses. A reins
	// extension.
	Message string `json:"message,omitempty"`
}

// RefreshAttempt is the outcome of a refresh tried during validation:
// succeeded, failed, connect_error or no_refresh_token.
type RefreshAttempt struct {
	Status       string        `json:"status"`
	HTTPResponse *HTTPResponse `json:"http_response"`
	// Message says why a connect_error happened, as MCPProbe.Message
	// does. A reins extension.
	Message string `json:"message,omitempty"`
}

// HTTPResponse is an HTTP response captured by a validation probe. Body is
// a short, sanitised excerpt (see connector.Capture).
type HTTPResponse struct {
	StatusCode    int    `json:"status_code"`
	ContentType   string `json:"content_type"`
	Body          string `json:"body"`
	BodyTruncated bool   `json:"body_truncated"`
}
