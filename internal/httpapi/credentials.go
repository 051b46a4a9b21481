package httpapi

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/connector"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

// Limits of credential fields.
const (
	maxSecretLen   = 16 << 10
	maxAllowedHost = 16
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)

// object is a JSON object being validated field by field, with the path
// of each field for error messages.
type object struct {
	path string
	m    map[string]json.RawMessage
}

func asObject(path string, raw json.RawMessage) (object, error) {
	o := object{path: path}
	if err := json.Unmarshal(raw, &o.m); err != nil || o.m == nil {
		return o, badRequest("%s: must be an object", path)
	}
	return o, nil
}

func (o object) at(key string) string { return o.path + "." + key }

func (o object) has(key string) bool {
	v, ok := o.m[key]
	return ok && string(v) != "null"
}

// only rejects fields outside allowed, naming what the kind accepts.
func (o object) only(what string, allowed ...string) error {
	var extra []string
	for k := range o.m {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	slices.Sort(extra)
	return badRequest("%s: unknown field for %s (accepted: %s)", o.at(extra[0]), what, strings.Join(allowed, ", "))
}

// immutable rejects the given fields in an update.
func (o object) immutable(keys ...string) error {
	for _, k := range keys {
		if _, ok := o.m[k]; ok {
			return badRequest("%s: immutable; create a new credential instead", o.at(k))
		}
	}
	return nil
}

func (o object) str(key string, required bool) (string, bool, error) {
	raw, ok := o.m[key]
	if !ok || string(raw) == "null" {
		if required {
			return "", false, badRequest("%s: required", o.at(key))
		}
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, badRequest("%s: expected a string", o.at(key))
	}
	return s, true, nil
}

func (o object) secret(key string, required bool) (string, bool, error) {
	s, ok, err := o.str(key, required)
	if err != nil || !ok {
		return s, ok, err
	}
	if s == "" {
		return "", false, badRequest("%s: must not be empty", o.at(key))
	}
	if len(s) > maxSecretLen {
		return "", false, badRequest("%s: longer than %d bytes", o.at(key), maxSecretLen)
	}
	return s, true, nil
}

func (o object) boolean(key string) (*bool, error) {
	raw, ok := o.m[key]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, badRequest("%s: expected a boolean", o.at(key))
	}
	return &b, nil
}

func (o object) obj(key string) (object, bool, error) {
	raw, ok := o.m[key]
	if !ok || string(raw) == "null" {
		return object{}, false, nil
	}
	sub, err := asObject(o.at(key), raw)
	return sub, err == nil, err
}

func (o object) url(key string, required bool) (string, bool, error) {
	s, ok, err := o.str(key, required)
	if err != nil || !ok {
		return s, ok, err
	}
	u, perr := url.Parse(s)
	if perr != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", false, badRequest("%s: must be an absolute http or https URL, got %q", o.at(key), s)
	}
	return s, true, nil
}

func (o object) future(key string) (*string, error) {
	s, ok, err := o.str(key, false)
	if err != nil || !ok {
		return nil, err
	}
	t, perr := time.Parse(time.RFC3339Nano, s)
	if perr != nil {
		return nil, badRequest("%s: must be an RFC 3339 timestamp, got %q", o.at(key), s)
	}
	if !t.After(time.Now()) {
		return nil, badRequest("%s: must be in the future, got %s", o.at(key), s)
	}
	v := ma.Time(t)
	return &v, nil
}

// authCreate parses a create auth object into its public part and its
// secrets.
func authCreate(raw json.RawMessage) (ma.CredentialAuth, vault.Secrets, error) {
	var a ma.CredentialAuth
	var sec vault.Secrets
	if len(raw) == 0 || string(raw) == "null" {
		return a, sec, badRequest("auth: required")
	}
	o, err := asObject("auth", raw)
	if err != nil {
		return a, sec, err
	}
	typ, _, err := o.str("type", true)
	if err != nil {
		return a, sec, err
	}
	a.Type = typ
	switch typ {
	case ma.AuthStaticBearer:
		err = staticBearerCreate(o, &a, &sec)
	case ma.AuthMCPOAuth:
		err = mcpOAuthCreate(o, &a, &sec)
	case ma.AuthEnvVar:
		err = envVarCreate(o, &a, &sec)
	default:
		err = badRequest("auth.type: must be mcp_oauth, static_bearer or environment_variable; got %q", typ)
	}
	return a, sec, err
}

// staticBearerCreate parses the fields of a static_bearer credential.
func staticBearerCreate(o object, a *ma.CredentialAuth, sec *vault.Secrets) error {
	if err := o.only("static_bearer credentials", "type", "mcp_server_url", "token"); err != nil {
		return err
	}
	var err error
	if a.MCPServerURL, _, err = o.url("mcp_server_url", true); err != nil {
		return err
	}
	sec.Token, _, err = o.secret("token", true)
	return err
}

// mcpOAuthCreate parses the fields of an mcp_oauth credential.
func mcpOAuthCreate(o object, a *ma.CredentialAuth, sec *vault.Secrets) error {
	if err := o.only("mcp_oauth credentials", "type", "mcp_server_url", "access_token", "expires_at", "refresh"); err != nil {
		return err
	}
	var err error
	if a.MCPServerURL, _, err = o.url("mcp_server_url", true); err != nil {
		return err
	}
	if sec.AccessToken, _, err = o.secret("access_token", true); err != nil {
		return err
	}
	if a.ExpiresAt, err = o.future("expires_at"); err != nil {
		return err
	}
	ro, ok, err := o.obj("refresh")
	if err != nil || !ok {
		return err
	}
	a.Refresh, err = refreshCreate(ro, sec)
	return err
}

// envVarCreate parses the fields of an environment_variable credential.
func envVarCreate(o object, a *ma.CredentialAuth, sec *vault.Secrets) error {
	if err := o.only("environment_variable credentials", "type", "secret_name", "secret_value", "networking", "injection_location"); err != nil {
		return err
	}
	name, _, err := o.str("secret_name", true)
	if err != nil {
		return err
	}
	if !envName.MatchString(name) {
		return badRequest("auth.secret_name: must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 255 characters), got %q", name)
	}
	a.SecretName = name
	if sec.Value, _, err = o.secret("secret_value", true); err != nil {
		return err
	}
	no, ok, err := o.obj("networking")
	if err != nil {
		return err
	}
	if !ok {
		return badRequest("auth.networking: required")
	}
	if a.Networking, err = credentialNetworking(no); err != nil {
		return err
	}
	// Without injection_location the value is substituted in headers,
	// where API keys go; a credential substituted nowhere would be of
	// no use.
	a.InjectionLocation = &ma.InjectionLocation{Header: true}
	if lo, ok, err := o.obj("injection_location"); err != nil {
		return err
	} else if ok {
		return injection(lo, a.InjectionLocation)
	}
	return nil
}

func refreshCreate(o object, sec *vault.Secrets) (*ma.OAuthRefresh, error) {
	if err := o.only("refresh", "client_id", "refresh_token", "token_endpoint", "token_endpoint_auth", "resource", "scope"); err != nil {
		return nil, err
	}
	var r ma.OAuthRefresh
	var err error
	if r.ClientID, _, err = o.str("client_id", true); err != nil {
		return nil, err
	}
	if r.ClientID == "" {
		return nil, badRequest("%s: must not be empty", o.at("client_id"))
	}
	if sec.RefreshToken, _, err = o.secret("refresh_token", true); err != nil {
		return nil, err
	}
	if r.TokenEndpoint, _, err = o.url("token_endpoint", true); err != nil {
		return nil, err
	}
	for _, k := range []string{"resource", "scope"} {
		v, ok, err := o.str(k, false)
		if err != nil {
			return nil, err
		}
		if ok {
			if k == "resource" {
				r.Resource = &v
			} else {
				r.Scope = &v
			}
		}
	}
	ao, ok, err := o.obj("token_endpoint_auth")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest("%s: required", o.at("token_endpoint_auth"))
	}
	typ, _, err := ao.str("type", true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "none":
		if err := ao.only("token_endpoint_auth none", "type"); err != nil {
			return nil, err
		}
	case "client_secret_basic", "client_secret_post":
		if err := ao.only("token_endpoint_auth "+typ, "type", "client_secret"); err != nil {
			return nil, err
		}
		if sec.ClientSecret, _, err = ao.secret("client_secret", true); err != nil {
			return nil, err
		}
	default:
		return nil, badRequest("%s: must be none, client_secret_basic or client_secret_post; got %q", ao.at("type"), typ)
	}
	r.TokenEndpointAuth.Type = typ
	return &r, nil
}

func credentialNetworking(o object) (*ma.CredentialNetworking, error) {
	typ, _, err := o.str("type", true)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "unrestricted":
		if err := o.only("unrestricted networking", "type"); err != nil {
			return nil, err
		}
		return &ma.CredentialNetworking{Type: typ}, nil
	case "limited":
		if err := o.only("limited networking", "type", "allowed_hosts"); err != nil {
			return nil, err
		}
		var hosts []string
		raw, ok := o.m["allowed_hosts"]
		if !ok || string(raw) == "null" {
			return nil, badRequest("%s: required with type limited", o.at("allowed_hosts"))
		}
		if err := json.Unmarshal(raw, &hosts); err != nil {
			return nil, badRequest("%s: expected an array of strings", o.at("allowed_hosts"))
		}
		if len(hosts) == 0 || len(hosts) > maxAllowedHost {
			return nil, badRequest("%s: must have 1 to %d hosts, got %d", o.at("allowed_hosts"), maxAllowedHost, len(hosts))
		}
		for i, h := range hosts {
			if err := credentialHost(h); err != nil {
				return nil, badRequest("%s[%d]: %v", o.at("allowed_hosts"), i, err)
			}
		}
		return &ma.CredentialNetworking{Type: typ, AllowedHosts: hosts}, nil
	}
	return nil, badRequest("%s: must be unrestricted or limited; got %q", o.at("type"), typ)
}

// credentialHost accepts a bare host name, an IPv4 address or "*.domain"
// (no URLs, ports, paths or IPv6).
func credentialHost(h string) error {
	if ip := net.ParseIP(h); ip != nil {
		if ip.To4() == nil {
			return errors.New("IPv6 addresses are not accepted")
		}
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 || strings.ContainsAny(name, "/:@ *?#[]") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return errors.New("must be a bare host name, an IPv4 address or *.domain, got " + strconvQuote(h))
	}
	return nil
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func injection(o object, loc *ma.InjectionLocation) error {
	if err := o.only("injection_location", "body", "header"); err != nil {
		return err
	}
	for _, k := range []string{"body", "header"} {
		b, err := o.boolean(k)
		if err != nil {
			return err
		}
		if b != nil {
			if k == "body" {
				loc.Body = *b
			} else {
				loc.Header = *b
			}
		}
	}
	return nil
}

// authUpdate applies an update auth object to the credential's auth and
// secrets.
func authUpdate(raw json.RawMessage, a *ma.CredentialAuth, sec *vault.Secrets, credID string) error {
	o, err := asObject("auth", raw)
	if err != nil {
		return err
	}
	typ, _, err := o.str("type", true)
	if err != nil {
		return err
	}
	if typ != a.Type {
		return badRequest("auth.type: credential %s is a %s credential; its type cannot change to %q", credID, a.Type, typ)
	}
	switch typ {
	case ma.AuthStaticBearer:
		return staticBearerUpdate(o, sec)
	case ma.AuthMCPOAuth:
		return mcpOAuthUpdate(o, a, sec, credID)
	case ma.AuthEnvVar:
		return envVarUpdate(o, a, sec)
	}
	return badRequest("auth.type: must be mcp_oauth, static_bearer or environment_variable; got %q", typ)
}

// staticBearerUpdate applies an update of a static_bearer credential.
func staticBearerUpdate(o object, sec *vault.Secrets) error {
	if err := o.immutable("mcp_server_url"); err != nil {
		return err
	}
	if err := o.only("static_bearer updates", "type", "token"); err != nil {
		return err
	}
	if v, ok, err := o.secret("token", false); err != nil {
		return err
	} else if ok {
		sec.Token = v
	}
	return nil
}

// mcpOAuthUpdate applies an update of an mcp_oauth credential.
func mcpOAuthUpdate(o object, a *ma.CredentialAuth, sec *vault.Secrets, credID string) error {
	if err := o.immutable("mcp_server_url"); err != nil {
		return err
	}
	if err := o.only("mcp_oauth updates", "type", "access_token", "expires_at", "refresh"); err != nil {
		return err
	}
	if v, ok, err := o.secret("access_token", false); err != nil {
		return err
	} else if ok {
		sec.AccessToken = v
	}
	if o.has("expires_at") {
		var err error
		if a.ExpiresAt, err = o.future("expires_at"); err != nil {
			return err
		}
	}
	ro, ok, err := o.obj("refresh")
	if err != nil || !ok {
		return err
	}
	if a.Refresh == nil {
		return badRequest("auth.refresh: credential %s has no refresh configuration to update; create a new credential with one", credID)
	}
	return refreshUpdate(ro, a.Refresh, sec)
}

// envVarUpdate applies an update of an environment_variable credential.
func envVarUpdate(o object, a *ma.CredentialAuth, sec *vault.Secrets) error {
	if err := o.immutable("secret_name"); err != nil {
		return err
	}
	if err := o.only("environment_variable updates", "type", "secret_value", "networking", "injection_location"); err != nil {
		return err
	}
	if v, ok, err := o.secret("secret_value", false); err != nil {
		return err
	} else if ok {
		sec.Value = v
	}
	if no, ok, err := o.obj("networking"); err != nil {
		return err
	} else if ok {
		if a.Networking, err = credentialNetworking(no); err != nil {
			return err
		}
	}
	if lo, ok, err := o.obj("injection_location"); err != nil {
		return err
	} else if ok {
		loc := ma.InjectionLocation{}
		if a.InjectionLocation != nil {
			loc = *a.InjectionLocation
		}
		if err := injection(lo, &loc); err != nil {
			return err
		}
		a.InjectionLocation = &loc
	}
	return nil
}

func refreshUpdate(o object, r *ma.OAuthRefresh, sec *vault.Secrets) error {
	if err := o.immutable("client_id", "token_endpoint", "resource"); err != nil {
		return err
	}
	if err := o.only("refresh updates", "refresh_token", "scope", "token_endpoint_auth"); err != nil {
		return err
	}
	if v, ok, err := o.secret("refresh_token", false); err != nil {
		return err
	} else if ok {
		sec.RefreshToken = v
	}
	if v, ok, err := o.str("scope", false); err != nil {
		return err
	} else if ok {
		if v == "" {
			r.Scope = nil
		} else {
			r.Scope = &v
		}
	}
	ao, ok, err := o.obj("token_endpoint_auth")
	if err != nil || !ok {
		return err
	}
	typ, _, err := ao.str("type", true)
	if err != nil {
		return err
	}
	if typ != "client_secret_basic" && typ != "client_secret_post" {
		return badRequest("%s: must be client_secret_basic or client_secret_post; got %q", ao.at("type"), typ)
	}
	if err := ao.only("token_endpoint_auth "+typ, "type", "client_secret"); err != nil {
		return err
	}
	v, ok, err := ao.secret("client_secret", false)
	if err != nil {
		return err
	}
	if ok {
		sec.ClientSecret = v
	} else if sec.ClientSecret == "" {
		return badRequest("%s: required when the credential has no client secret yet", ao.at("client_secret"))
	}
	r.TokenEndpointAuth.Type = typ
	return nil
}

type credentialCreate struct {
	Auth        json.RawMessage   `json:"auth"`
	DisplayName optString         `json:"display_name"`
	Metadata    map[string]string `json:"metadata"`
}

func (v *vaultAPI) createCredential(w http.ResponseWriter, r *http.Request) error {
	vaultID := r.PathValue("id")
	var p credentialCreate
	if err := decode(r, &p); err != nil {
		return err
	}
	vt, err := v.st.GetVault(r.Context(), vaultID)
	if err != nil {
		return err
	}
	if vt.ArchivedAt != nil {
		return conflict("vault %s is archived; it accepts no new credentials", vaultID)
	}
	auth, sec, err := authCreate(p.Auth)
	if err != nil {
		return err
	}
	var name *string
	if p.DisplayName.Set && !p.DisplayName.Null {
		if err := checkLen("display_name", p.DisplayName.Value, 0, 255); err != nil {
			return err
		}
		name = &p.DisplayName.Value
	}
	if err := validateMetadata("metadata", p.Metadata); err != nil {
		return err
	}
	meta := ma.Metadata(p.Metadata)
	if meta == nil {
		meta = ma.Metadata{}
	}
	now := ma.Time(time.Now())
	c := store.Credential{Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: vaultID,
		DisplayName: name, Metadata: meta, Auth: auth, CreatedAt: now, UpdatedAt: now}}
	if c.Sealed, err = v.keys.SealSecrets(sec, c.ID); err != nil {
		return err
	}
	ctx := withAudit(r, "vault_credential.created", "vault_credential", c.ID, requestWorkspace(r), map[string]string{"vault_id": vaultID})
	if err := v.st.CreateCredential(ctx, c); err != nil {
		return credentialErr(err, auth)
	}
	writeJSON(w, c.Credential)
	return nil
}

// credentialErr words the store's uniqueness conflict.
func credentialErr(err error, a ma.CredentialAuth) error {
	if !isConflict(err) {
		return err
	}
	if a.Type == ma.AuthEnvVar {
		return conflict("auth.secret_name: the vault already has a live credential named %q", a.SecretName)
	}
	return conflict("auth.mcp_server_url: the vault already has a live credential for %s", a.MCPServerURL)
}

func (v *vaultAPI) getCredential(w http.ResponseWriter, r *http.Request) error {
	c, err := v.st.GetCredential(r.Context(), r.PathValue("id"), r.PathValue("cid"))
	if err != nil {
		return v.credentialNotFound(r, err)
	}
	writeJSON(w, c.Credential)
	return nil
}

// credentialNotFound says whether the vault or the credential is missing.
func (v *vaultAPI) credentialNotFound(r *http.Request, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, verr := v.st.GetVault(r.Context(), r.PathValue("id")); verr != nil {
		return verr
	}
	return notFound("credential %s not found in vault %s", r.PathValue("cid"), r.PathValue("id"))
}

type credentialUpdate struct {
	Auth        json.RawMessage `json:"auth"`
	DisplayName optString       `json:"display_name"`
	Metadata    metadataPatch   `json:"metadata"`
}

func (v *vaultAPI) updateCredential(w http.ResponseWriter, r *http.Request) error {
	var p credentialUpdate
	if err := decode(r, &p); err != nil {
		return err
	}
	ctx := withAudit(r, "vault_credential.updated", "vault_credential", r.PathValue("cid"), requestWorkspace(r),
		map[string]any{"vault_id": r.PathValue("id"), "auth_changed": len(p.Auth) > 0 && string(p.Auth) != "null"})
	c, err := v.st.UpdateCredential(ctx, r.PathValue("id"), r.PathValue("cid"), func(cur *store.Credential) error {
		if cur.ArchivedAt != nil {
			return conflict("credential %s is archived and read-only", cur.ID)
		}
		if len(p.Auth) > 0 && string(p.Auth) != "null" {
			sec, err := v.keys.OpenSecrets(cur.Sealed, cur.ID)
			if err != nil {
				return err
			}
			if err := authUpdate(p.Auth, &cur.Auth, &sec, cur.ID); err != nil {
				return err
			}
			if cur.Sealed, err = v.keys.SealSecrets(sec, cur.ID); err != nil {
				return err
			}
		}
		if p.DisplayName.Set {
			if p.DisplayName.Null {
				cur.DisplayName = nil
			} else {
				if err := checkLen("display_name", p.DisplayName.Value, 0, 255); err != nil {
					return err
				}
				name := p.DisplayName.Value
				cur.DisplayName = &name
			}
		}
		if p.Metadata != nil {
			if err := validateMetadataPatch("metadata", cur.Metadata, p.Metadata); err != nil {
				return err
			}
			cur.Metadata = applyMetadata(cur.Metadata, p.Metadata)
		}
		cur.UpdatedAt = ma.Time(time.Now())
		return nil
	})
	if err != nil {
		return v.credentialNotFound(r, err)
	}
	writeJSON(w, c.Credential)
	return nil
}

func (v *vaultAPI) archiveCredential(w http.ResponseWriter, r *http.Request) error {
	ctx := withAudit(r, "vault_credential.archived", "vault_credential", r.PathValue("cid"), requestWorkspace(r), map[string]string{"vault_id": r.PathValue("id")})
	c, err := v.st.UpdateCredential(ctx, r.PathValue("id"), r.PathValue("cid"), func(cur *store.Credential) error {
		if cur.ArchivedAt == nil {
			now := ma.Time(time.Now())
			cur.ArchivedAt, cur.UpdatedAt = &now, now
		}
		return nil
	})
	if err != nil {
		return v.credentialNotFound(r, err)
	}
	writeJSON(w, c.Credential)
	return nil
}

func (v *vaultAPI) deleteCredential(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("cid")
	ctx := withAudit(r, "vault_credential.deleted", "vault_credential", id, requestWorkspace(r), map[string]string{"vault_id": r.PathValue("id")})
	if err := v.st.DeleteCredential(ctx, r.PathValue("id"), id); err != nil {
		return v.credentialNotFound(r, err)
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "vault_credential_deleted"})
	return nil
}

func (v *vaultAPI) listCredentials(w http.ResponseWriter, r *http.Request) error {
	vaultID := r.PathValue("id")
	lq, order, err := listQuery(r, "asc")
	if err != nil {
		return err
	}
	if _, err := v.st.GetVault(r.Context(), vaultID); err != nil {
		return err
	}
	items, err := v.st.ListCredentials(r.Context(), vaultID, lq)
	if err != nil {
		return err
	}
	out := make([]store.Item[ma.Credential], len(items))
	for i, it := range items {
		out[i] = store.Item[ma.Credential]{Pos: it.Pos, Value: it.Value.Credential}
	}
	writePage(w, out, lq, order)
	return nil
}

// validateCredential probes an mcp_oauth credential's MCP server with its
// access token and, when the server rejects it and a refresh configuration
// exists, tries a refresh (storing the new token) and probes again.
func (v *vaultAPI) validateCredential(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	c, err := v.st.GetCredential(ctx, r.PathValue("id"), r.PathValue("cid"))
	if err != nil {
		return v.credentialNotFound(r, err)
	}
	if c.Auth.Type != ma.AuthMCPOAuth {
		return badRequest("credential %s is a %s credential; only mcp_oauth credentials can be validated", c.ID, c.Auth.Type)
	}
	if c.ArchivedAt != nil {
		return conflict("credential %s is archived", c.ID)
	}
	sec, err := v.keys.OpenSecrets(c.Sealed, c.ID)
	if err != nil {
		return err
	}
	out := ma.CredentialValidation{Type: "vault_credential_validation", CredentialID: c.ID, VaultID: c.VaultID,
		HasRefreshToken: c.Auth.Refresh != nil && sec.RefreshToken != ""}

	probe := func(token string) (string, *ma.MCPProbe) {
		resp, err := connector.Probe(ctx, v.probe, c.Auth.MCPServerURL, token)
		switch {
		case err != nil:
			return "unknown", &ma.MCPProbe{Method: "initialize", Message: err.Error()}
		case resp == nil:
			return "valid", nil
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return "invalid", &ma.MCPProbe{Method: "initialize", HTTPResponse: httpResponse(resp)}
		default:
			return "unknown", &ma.MCPProbe{Method: "initialize", HTTPResponse: httpResponse(resp)}
		}
	}
	status, failed := probe(sec.AccessToken)
	out.Status, out.MCPProbe = status, failed
	if status == "invalid" {
		if !out.HasRefreshToken {
			out.Refresh = &ma.RefreshAttempt{Status: "no_refresh_token"}
		} else {
			_, tok, err := connector.RefreshCredential(ctx, v.probe, v.st, v.keys, c)
			var re *connector.RefreshError
			switch {
			case err == nil:
				out.Refresh = &ma.RefreshAttempt{Status: "succeeded"}
				if st, again := probe(tok); st == "valid" {
					out.Status, out.MCPProbe = "valid", nil
				} else {
					out.Status, out.MCPProbe = st, again
				}
			case errors.As(err, &re) && re.Response != nil:
				out.Refresh = &ma.RefreshAttempt{Status: "failed", HTTPResponse: httpResponse(re.Response)}
			case errors.As(err, &re):
				out.Refresh = &ma.RefreshAttempt{Status: "connect_error", Message: re.Err.Error()}
				out.Status = "unknown"
			default:
				return err
			}
		}
	}
	out.ValidatedAt = ma.Time(time.Now())
	writeJSON(w, out)
	return nil
}

func httpResponse(r *connector.HTTPResponse) *ma.HTTPResponse {
	return &ma.HTTPResponse{StatusCode: r.StatusCode, ContentType: r.ContentType, Body: r.Body, BodyTruncated: r.BodyTruncated}
}
