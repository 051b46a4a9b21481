package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/spf13/cobra"

	ma "github.com/reinsdev/reins/managedagents"
)

// credentialTypes are the accepted values of --type.
var credentialTypes = []string{ma.AuthStaticBearer, ma.AuthMCPOAuth, ma.AuthEnvVar}

// credentialTypeFlags are the auth flags each credential type accepts;
// any other of them is refused for that type.
var credentialTypeFlags = map[string][]string{
	ma.AuthStaticBearer: {"mcp-server-url", "token-file"},
	ma.AuthMCPOAuth: {"mcp-server-url", "access-token-file", "expires-at", "client-id", "refresh-token-file",
		"token-endpoint", "token-endpoint-auth", "client-secret-file", "resource", "scope"},
	ma.AuthEnvVar: {"secret-name", "value-file", "networking", "allowed-host", "inject"},
}

// credentialFields are the flags of `vaults credentials create`.
type credentialFields struct {
	typ, displayName                  string
	metadata                          []string
	mcpServerURL, tokenFile           string
	accessTokenFile, expiresAt        string
	clientID, refreshTokenFile        string
	tokenEndpoint, tokenEndpointAuth  string
	clientSecretFile, resource, scope string
	secretName, valueFile, networking string
	allowedHosts, inject              []string
}

func (f *credentialFields) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "credential type: "+strings.Join(credentialTypes, ", "))
	fl.StringVar(&f.displayName, "display-name", "", "display name")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "metadata KEY=VALUE (repeatable)")
	fl.StringVar(&f.mcpServerURL, "mcp-server-url", "", "static_bearer, mcp_oauth: the MCP server's URL")
	fl.StringVar(&f.tokenFile, "token-file", "", "static_bearer: file holding the bearer token (- for stdin)")
	fl.StringVar(&f.accessTokenFile, "access-token-file", "", "mcp_oauth: file holding the access token (- for stdin)")
	fl.StringVar(&f.expiresAt, "expires-at", "", "mcp_oauth: when the access token expires (RFC 3339)")
	fl.StringVar(&f.clientID, "client-id", "", "mcp_oauth refresh: the OAuth client id")
	fl.StringVar(&f.refreshTokenFile, "refresh-token-file", "", "mcp_oauth refresh: file holding the refresh token (- for stdin)")
	fl.StringVar(&f.tokenEndpoint, "token-endpoint", "", "mcp_oauth refresh: the token endpoint URL")
	fl.StringVar(&f.tokenEndpointAuth, "token-endpoint-auth", "", "mcp_oauth refresh: none, client_secret_basic or client_secret_post (default none)")
	fl.StringVar(&f.clientSecretFile, "client-secret-file", "", "mcp_oauth refresh: file holding the client secret (- for stdin)")
	fl.StringVar(&f.resource, "resource", "", "mcp_oauth refresh: resource parameter")
	fl.StringVar(&f.scope, "scope", "", "mcp_oauth refresh: scope parameter")
	fl.StringVar(&f.secretName, "secret-name", "", "environment_variable: the variable's name")
	fl.StringVar(&f.valueFile, "value-file", "", "environment_variable: file holding the value (- for stdin)")
	fl.StringVar(&f.networking, "networking", "", "environment_variable: unrestricted or limited")
	fl.StringArrayVar(&f.allowedHosts, "allowed-host", nil, "environment_variable: a host the value may be sent to, with --networking limited (repeatable)")
	fl.StringSliceVar(&f.inject, "inject", nil, "environment_variable: where the value is substituted: header, body or header,body (default header)")
}

// check refuses an unknown type and flags of another type, before any
// request is made.
func (f *credentialFields) check(cmd *cobra.Command) error {
	allowed, ok := credentialTypeFlags[f.typ]
	if !ok {
		return fmt.Errorf("--type: want one of %s, got %q", strings.Join(credentialTypes, ", "), f.typ)
	}
	for _, typ := range credentialTypes {
		for _, name := range credentialTypeFlags[typ] {
			if cmd.Flags().Changed(name) && !slices.Contains(allowed, name) {
				return fmt.Errorf("--%s does not apply to %s credentials (they take --%s)", name, f.typ, strings.Join(allowed, ", --"))
			}
		}
	}
	return nil
}

// body builds the request body, reading the secrets from their files.
func (f *credentialFields) body(cmd *cobra.Command) ([]byte, error) {
	if err := f.check(cmd); err != nil {
		return nil, err
	}
	sr := &secretReader{stdin: cmd.InOrStdin()}
	var auth map[string]any
	var err error
	switch f.typ {
	case ma.AuthStaticBearer:
		auth, err = f.bearer(sr)
	case ma.AuthMCPOAuth:
		auth, err = f.oauth(cmd, sr)
	default:
		auth, err = f.envVar(sr)
	}
	if err != nil {
		return nil, err
	}
	body := map[string]any{"auth": auth}
	if cmd.Flags().Changed("display-name") {
		body["display_name"] = f.displayName
	}
	md, err := parsePairs("metadata", f.metadata)
	if err != nil {
		return nil, err
	}
	if md != nil {
		body["metadata"] = md
	}
	return json.Marshal(body)
}

func (f *credentialFields) bearer(sr *secretReader) (map[string]any, error) {
	if f.mcpServerURL == "" {
		return nil, fmt.Errorf("--mcp-server-url: required for static_bearer credentials")
	}
	token, err := sr.read("token-file", f.tokenFile)
	if err != nil {
		return nil, err
	}
	return map[string]any{"type": ma.AuthStaticBearer, "mcp_server_url": f.mcpServerURL, "token": token}, nil
}

func (f *credentialFields) oauth(cmd *cobra.Command, sr *secretReader) (map[string]any, error) {
	if f.mcpServerURL == "" {
		return nil, fmt.Errorf("--mcp-server-url: required for mcp_oauth credentials")
	}
	token, err := sr.read("access-token-file", f.accessTokenFile)
	if err != nil {
		return nil, err
	}
	auth := map[string]any{"type": ma.AuthMCPOAuth, "mcp_server_url": f.mcpServerURL, "access_token": token}
	if f.expiresAt != "" {
		auth["expires_at"] = f.expiresAt
	}
	var refreshSet bool
	for _, name := range []string{"client-id", "refresh-token-file", "token-endpoint", "token-endpoint-auth", "client-secret-file", "resource", "scope"} {
		refreshSet = refreshSet || cmd.Flags().Changed(name)
	}
	if !refreshSet {
		return auth, nil
	}
	if f.clientID == "" || f.tokenEndpoint == "" || f.refreshTokenFile == "" {
		return nil, fmt.Errorf("a refresh configuration needs --client-id, --token-endpoint and --refresh-token-file")
	}
	refresh := map[string]any{"client_id": f.clientID, "token_endpoint": f.tokenEndpoint}
	if refresh["refresh_token"], err = sr.read("refresh-token-file", f.refreshTokenFile); err != nil {
		return nil, err
	}
	tea := map[string]any{}
	switch f.tokenEndpointAuth {
	case "", "none":
		if f.clientSecretFile != "" {
			return nil, fmt.Errorf("--client-secret-file needs --token-endpoint-auth client_secret_basic or client_secret_post")
		}
		tea["type"] = "none"
	case "client_secret_basic", "client_secret_post":
		tea["type"] = f.tokenEndpointAuth
		if tea["client_secret"], err = sr.read("client-secret-file", f.clientSecretFile); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--token-endpoint-auth: want none, client_secret_basic or client_secret_post, got %q", f.tokenEndpointAuth)
	}
	refresh["token_endpoint_auth"] = tea
	if cmd.Flags().Changed("resource") {
		refresh["resource"] = f.resource
	}
	if cmd.Flags().Changed("scope") {
		refresh["scope"] = f.scope
	}
	auth["refresh"] = refresh
	return auth, nil
}

func (f *credentialFields) envVar(sr *secretReader) (map[string]any, error) {
	if f.secretName == "" {
		return nil, fmt.Errorf("--secret-name: required for environment_variable credentials")
	}
	networking := map[string]any{"type": f.networking}
	switch f.networking {
	case "unrestricted":
		if len(f.allowedHosts) > 0 {
			return nil, fmt.Errorf("--allowed-host needs --networking limited")
		}
	case "limited":
		networking["allowed_hosts"] = f.allowedHosts
	case "":
		return nil, fmt.Errorf("--networking: required for environment_variable credentials (unrestricted or limited)")
	default:
		return nil, fmt.Errorf("--networking: want unrestricted or limited, got %q", f.networking)
	}
	value, err := sr.read("value-file", f.valueFile)
	if err != nil {
		return nil, err
	}
	auth := map[string]any{"type": ma.AuthEnvVar, "secret_name": f.secretName, "secret_value": value, "networking": networking}
	if f.inject != nil {
		loc := map[string]any{"header": false, "body": false}
		for _, where := range f.inject {
			if where != "header" && where != "body" {
				return nil, fmt.Errorf("--inject: want header, body or header,body, got %q", where)
			}
			loc[where] = true
		}
		auth["injection_location"] = loc
	}
	return auth, nil
}

// secretReader reads secrets from files, or one of them from stdin.
type secretReader struct {
	stdin     io.Reader
	stdinUsed string
}

// read returns the secret in path ("-" = stdin) without its trailing
// newline. The secret never appears in an error.
func (r *secretReader) read(flag, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("--%s: required (a file holding the secret, or - for stdin)", flag)
	}
	var b []byte
	var err error
	if path == "-" {
		if r.stdinUsed != "" {
			return "", fmt.Errorf("--%s and --%s both read stdin; give one of them a file", r.stdinUsed, flag)
		}
		r.stdinUsed = flag
		b, err = io.ReadAll(r.stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flag, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("--%s: the secret is empty", flag)
	}
	return s, nil
}

func credCreate(cf *clientFlags) *cobra.Command {
	var f credentialFields
	cmd := &cobra.Command{
		Use:   "create VAULT_ID --type TYPE [flags]",
		Short: "Create a credential; its secret is read from a file or stdin and never printed",
		Example: `  reins vaults credentials create vlt_01… --type static_bearer --mcp-server-url https://mcp.example.com/mcp --token-file token.txt
  printf %s "$TOKEN" | reins vaults credentials create vlt_01… --type mcp_oauth --mcp-server-url https://mcp.example.com/mcp --access-token-file -
  reins vaults credentials create vlt_01… --type environment_variable --secret-name GITHUB_TOKEN --value-file - \
      --networking limited --allowed-host api.github.com`,
		Args: cobra.ExactArgs(1),
		// Refuse a bad --type before resolving the client or reading a secret.
		PreRunE: func(cmd *cobra.Command, _ []string) error { return f.check(cmd) },
		RunE: cf.withClient(func(cmd *cobra.Command, args []string, c *apiClient) error {
			body, err := f.body(cmd)
			if err != nil {
				return err
			}
			cr, err := c.Beta.Vaults.Credentials.New(cmd.Context(), args[0], anthropic.BetaVaultCredentialNewParams{}, option.WithRequestBody("application/json", body))
			if err != nil {
				return err
			}
			return printCredential(cmd.OutOrStdout(), c.output, cr)
		}),
	}
	f.register(cmd)
	_ = cmd.MarkFlagRequired("type")
	return cmd
}
