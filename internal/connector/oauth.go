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
	"unicode"
	"unicode/utf8"

	"github.com/reinsdev/reins/sandbox/netguard"
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

// HTTPResponse is a captured HTTP response: its status, content type and
// a short excerpt of its body, scrubbed of secrets and sanitised.
type HTTPResponse struct {
	StatusCode    int
	ContentType   string
	Body          string
	BodyTruncated bool
}

const (
	// maxScrubbed bounds the part of a body read to scrub secrets from
	// before the excerpt is cut.
	maxScrubbed = 64 << 10
	// MaxExcerpt bounds the body excerpt of a captured response: enough
	// to recognise an OAuth error or a gateway's error page, too little to
	// read an arbitrary host's answers through reins.
	MaxExcerpt = 256
)

// Capture describes resp: its status, content type and the first
// MaxExcerpt bytes of its body as printable text. Every secret (and the
// value of each JSON field that names a token or secret) is replaced with
// "[redacted]" before the excerpt is cut; line breaks and tabs become
// spaces and other control characters and invalid UTF-8 become U+FFFD.
// BodyTruncated reports a body longer than the excerpt.
func Capture(resp *http.Response, secrets ...string) *HTTPResponse {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxScrubbed+1))
	out := &HTTPResponse{StatusCode: resp.StatusCode, ContentType: excerpt(resp.Header.Get("Content-Type"), MaxExcerpt).text}
	more := len(b) > maxScrubbed
	if more {
		b = b[:maxScrubbed]
	}
	e := excerpt(Scrub(string(b), secrets...), MaxExcerpt)
	out.Body, out.BodyTruncated = e.text, e.cut || more
	return out
}

// cutText is a sanitised excerpt and whether it was cut short.
type cutText struct {
	text string
	cut  bool
}

// excerpt returns the first max bytes of s as printable text: line breaks
// and tabs become spaces, other control and format characters and invalid
// UTF-8 become U+FFFD. It cuts between characters.
func excerpt(s string, max int) cutText {
	var b strings.Builder
	for _, r := range s { // invalid UTF-8 reads as utf8.RuneError (U+FFFD)
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			r = ' '
		case !unicode.IsPrint(r) && r != ' ':
			r = utf8.RuneError
		}
		if b.Len()+utf8.RuneLen(r) > max {
			return cutText{b.String(), true}
		}
		b.WriteRune(r)
	}
	return cutText{b.String(), false}
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

// Refresh exchanges a refresh token at the token endpoint. client should
// come from netguard.Guard.Client; nil means a client of the zero Guard,
// which refuses internal addresses and follows no redirect to another
// origin.
func Refresh(ctx context.Context, client *http.Client, r RefreshRequest) (RefreshResult, error) {
	client, release := guarded(client)
	defer release()
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

// guarded returns client, or a client of the zero netguard.Guard when it
// is nil, with a func that releases what guarded made.
func guarded(client *http.Client) (*http.Client, func()) {
	if client != nil {
		return client, func() {}
	}
	client = (&netguard.Guard{}).Client(0)
	return client, client.CloseIdleConnections
}
