package netguard

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxRedirects bounds the same-origin redirects a Client follows, as
// net/http's default policy does.
const maxRedirects = 10

// Client returns an http.Client for requests to destinations that users
// choose (MCP servers, OAuth token endpoints): every connection, including
// those of redirects, passes g, and no proxy from the environment is used.
//
// It follows a redirect only to the origin (scheme, host and port) of the
// request that was redirected; a redirect to another origin is not
// followed and its 3xx response is returned as the answer. The credentials
// of such requests (an Authorization header, a client secret in a form)
// therefore never reach a host they were not meant for. timeout bounds
// each request including its body; 0 means none (for streams).
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: g.Transport(), CheckRedirect: SameOriginRedirect, Timeout: timeout}
}

// SameOriginRedirect is the redirect policy of [Guard.Client], for an
// http.Client's CheckRedirect: it follows up to 10 redirects within one
// origin and stops at the first redirect to another one, returning that
// response (http.ErrUseLastResponse).
func SameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	if !SameOrigin(req.URL, via[len(via)-1].URL) {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return http.ErrUseLastResponse
	}
	return nil
}

// SameOrigin reports whether a and b have the same origin: scheme, host
// and port, with a missing port read as the scheme's default. Host names
// compare case-insensitively.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

// port returns u's port, or the default port of its scheme.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}
