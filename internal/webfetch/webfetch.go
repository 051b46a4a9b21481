// Package webfetch runs the web_fetch tool inside reins, for models that
// have no server-side web tools of their own: it fetches one http(s) URL
// through the server's outbound guard and the session environment's
// network policy, with limits on time, size and redirects, and answers
// the model with the page as text.
package webfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/egress"
)

// Defaults of the Fetcher's limits.
const (
	DefaultMaxBytes     = 1 << 20 // bytes of response body read
	DefaultMaxText      = 100_000 // characters of text returned
	DefaultTimeout      = 30 * time.Second
	DefaultMaxRedirects = 5
)

// PolicyFunc returns the network policy of a session's environment.
type PolicyFunc func(ctx context.Context, sess *ma.Session) (egress.Policy, error)

// Fetcher runs web_fetch calls. It implements tool.Runner for that
// one tool.
type Fetcher struct {
	// Transport makes the connections; it must refuse internal addresses
	// (netguard.Guard.Transport).
	Transport http.RoundTripper
	// Policy decides which hosts a session may reach.
	Policy PolicyFunc
	// Limits; zero means the Default.
	MaxBytes     int64
	MaxText      int
	Timeout      time.Duration
	MaxRedirects int
}

type input struct {
	URL string `json:"url"`
}

// RunTool fetches the URL of call.Input ({"url": "..."}).
func (f *Fetcher) RunTool(ctx context.Context, sess *ma.Session, call tool.Call) tool.Result {
	var in input
	if err := json.Unmarshal(call.Input, &in); err != nil || in.URL == "" {
		return tool.ErrorResult(`web_fetch: the input must be {"url": "http(s)://..."}`)
	}
	u, err := checkURL(in.URL)
	if err != nil {
		return tool.ErrorResult("web_fetch: " + err.Error())
	}
	pol, err := f.Policy(ctx, sess)
	if err != nil {
		return tool.ErrorResult("web_fetch: the environment's network policy is unavailable: " + err.Error())
	}
	text, err := f.fetch(ctx, pol, u)
	if err != nil {
		return tool.ErrorResult("web_fetch " + u.Redacted() + ": " + err.Error())
	}
	return tool.Result{Content: []ma.ContentBlock{{Type: "text", Text: text}}}
}

// checkURL parses raw and requires an http or https URL with a host.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("only http and https URLs can be fetched, not %q", raw)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("the URL %q has no host", raw)
	}
	return u, nil
}

// errNotPermitted marks a host the environment's policy refuses.
var errNotPermitted = errors.New("not permitted")

func (f *Fetcher) fetch(ctx context.Context, pol egress.Policy, u *url.URL) (string, error) {
	if !pol.Permits(u.Hostname()) {
		return "", fmt.Errorf("the environment's networking does not allow host %s (add it to allowed_hosts)", u.Hostname())
	}
	maxRedirects := cmpOr(f.MaxRedirects, DefaultMaxRedirects)
	client := &http.Client{
		Transport: f.Transport,
		Timeout:   cmpOr(f.Timeout, DefaultTimeout),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if _, err := checkURL(req.URL.String()); err != nil {
				return err
			}
			if !pol.Permits(req.URL.Hostname()) {
				return fmt.Errorf("redirect to host %s: %w by the environment's networking", req.URL.Hostname(), errNotPermitted)
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "reins-web-fetch")
	req.Header.Set("Accept", "text/html, text/plain, application/json, application/xml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !textual(ct) {
		return "", fmt.Errorf("the response is %s, not text; web_fetch returns text and HTML pages only", ct)
	}
	maxBytes := cmpOr(f.MaxBytes, DefaultMaxBytes)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the response: %w", err)
	}
	cut := int64(len(body)) > maxBytes
	if cut {
		body = body[:maxBytes]
	}
	text := string(body)
	if ct == "text/html" || ct == "application/xhtml+xml" {
		text = HTMLText(text)
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	if maxText := cmpOr(f.MaxText, DefaultMaxText); len([]rune(text)) > maxText {
		text, cut = string([]rune(text)[:maxText]), true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %s\n", resp.Request.URL.Redacted(), resp.Status)
	if ct != "" {
		fmt.Fprintf(&b, "Content-Type: %s\n", ct)
	}
	b.WriteString("\n")
	b.WriteString(text)
	if cut {
		fmt.Fprintf(&b, "\n\n[truncated: the page is longer than web_fetch's limit (%d bytes read, %d characters returned)]", maxBytes, cmpOr(f.MaxText, DefaultMaxText))
	}
	if resp.StatusCode >= 400 {
		return "", errors.New(b.String())
	}
	return b.String(), nil
}

// textual reports whether a media type is text the model can read. An
// absent type is read as text.
func textual(ct string) bool {
	switch {
	case ct == "", strings.HasPrefix(ct, "text/"):
		return true
	case ct == "application/json", ct == "application/xml", ct == "application/xhtml+xml",
		strings.HasSuffix(ct, "+json"), strings.HasSuffix(ct, "+xml"):
		return true
	}
	return false
}

func cmpOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
