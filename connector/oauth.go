package connector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// RefreshRequest is an OAuth 2.0 refresh_token grant (RFC 6749 §6).
type RefreshRequest struct {
	TokenEndpoint string
	ClientID      string
	RefreshToken  string
	// AuthType is none, client_secret_basic or client_secret_post.
	AuthType     string
	ClientSecret string
	Resource     string
	Scope        string
}

// RefreshResult is what a token endpoint granted.
type RefreshResult struct {
	AccessToken string
	// RefreshToken is empty when the endpoint kept the old one.
	RefreshToken string
	// ExpiresIn is zero when the endpoint gave no lifetime.
	ExpiresIn time.Duration
}

// RefreshError is a failed refresh. Response is nil when the token
// endpoint could not be reached.
type RefreshError struct {
	Response *HTTPResponse
	Err      error
}

func (e *RefreshError) Error() string {
	if e.Response != nil {
		return fmt.Sprintf("token endpoint answered %d", e.Response.StatusCode)
	}
	return fmt.Sprintf("token endpoint unreachable: %v", e.Err)
}

func (e *RefreshError) Unwrap() error { return e.Err }

// HTTPResponse is a captured HTTP response, its body truncated and
// scrubbed of secrets.
type HTTPResponse struct {
	StatusCode    int
	ContentType   string
	Body          string
	BodyTruncated bool
}

// maxCapturedBody bounds captured response bodies.
const maxCapturedBody = 4096

// Capture reads up to 4 KiB of resp's body and replaces every secret in
// it (and the values of JSON fields that name tokens or secrets) with
// "[redacted]".
func Capture(resp *http.Response, secrets ...string) *HTTPResponse {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxCapturedBody+1))
	out := &HTTPResponse{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if len(b) > maxCapturedBody {
		b, out.BodyTruncated = b[:maxCapturedBody], true
	}
	out.Body = Scrub(string(b), secrets...)
	return out
}

// Scrub removes secrets from s: each given value, and the string values of
// JSON fields whose name contains "token" or "secret".
func Scrub(s string, secrets ...string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	var m map[string]any
	if json.Unmarshal([]byte(s), &m) == nil {
		changed := false
		for k, v := range m {
			lk := strings.ToLower(k)
			if _, isStr := v.(string); isStr && (strings.Contains(lk, "token") || strings.Contains(lk, "secret")) && lk != "token_type" {
				m[k] = "[redacted]"
				changed = true
			}
		}
		if changed {
			b, _ := json.Marshal(m)
			s = string(b)
		}
	}
	return s
}

// Refresh exchanges a refresh token at the token endpoint.
func Refresh(ctx context.Context, client *http.Client, r RefreshRequest) (RefreshResult, error) {
	if client == nil {
		client = http.DefaultClient
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {r.RefreshToken}}
	if r.Scope != "" {
		form.Set("scope", r.Scope)
	}
	if r.Resource != "" {
		form.Set("resource", r.Resource)
	}
	switch r.AuthType {
	case "client_secret_post":
		form.Set("client_id", r.ClientID)
		form.Set("client_secret", r.ClientSecret)
	case "client_secret_basic":
	default:
		form.Set("client_id", r.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return RefreshResult{}, &RefreshError{Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if r.AuthType == "client_secret_basic" {
		req.SetBasicAuth(url.QueryEscape(r.ClientID), url.QueryEscape(r.ClientSecret))
	}
	resp, err := client.Do(req)
	if err != nil {
		return RefreshResult{}, &RefreshError{Err: err}
	}
	defer resp.Body.Close()
	secrets := []string{r.RefreshToken, r.ClientSecret}
	if resp.StatusCode != http.StatusOK {
		return RefreshResult{}, &RefreshError{Response: Capture(resp, secrets...), Err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	var body struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(data, &body)
	}
	if err == nil && body.AccessToken == "" {
		err = errors.New("no access_token in the response")
	}
	if err != nil {
		resp.Body = io.NopCloser(strings.NewReader(string(data)))
		return RefreshResult{}, &RefreshError{Response: Capture(resp, secrets...), Err: err}
	}
	return RefreshResult{AccessToken: body.AccessToken, RefreshToken: body.RefreshToken, ExpiresIn: time.Duration(body.ExpiresIn) * time.Second}, nil
}
