package egress

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

// DefaultMaxBufferedBody is the default for Proxy.MaxBufferedBody.
const DefaultMaxBufferedBody = 1 << 20

// A Credential is a secret the sandbox knows only as a placeholder: the
// proxy replaces Placeholder by Value in the requests it sends to Hosts,
// and sends it unchanged anywhere else.
//
// Where Header is set, the replacement covers every request header
// value (Authorization, Cookie, custom headers...), the password of
// Basic credentials in Authorization, and the query string of the
// request URL, where Value is query-escaped. Where Body is set, it
// covers the request body as sent (a compressed body is not looked
// into). The path, the Host header and trailers are never touched.
//
// Placeholders should be distinct strings of one fixed length that no
// client would send by accident, such as a fixed prefix followed by
// random letters; none may contain another.
type Credential struct {
	Placeholder string
	Value       string
	// Hosts are the hosts the credential may be sent to, matched as
	// Policy.AllowedHosts are. Nil or empty means every host the policy
	// permits (the credential's networking is unrestricted).
	Hosts []string
	// Header and Body say where the placeholder is replaced. A
	// credential with neither is never substituted.
	Header, Body bool
}

// appliesTo reports whether c is substituted in requests to host.
func (c Credential) appliesTo(host string) bool {
	if c.Placeholder == "" || !c.Header && !c.Body {
		return false
	}
	return len(c.Hosts) == 0 || Policy{AllowedHosts: c.Hosts}.Permits(host)
}

// credentialsFor returns the proxy's credentials that apply to host.
func (p *Proxy) credentialsFor(host string) []Credential {
	var out []Credential
	creds := p.Credentials
	if p.CredentialSource != nil {
		creds = p.CredentialSource()
	}
	for _, c := range creds {
		if c.appliesTo(host) {
			out = append(out, c)
		}
	}
	return out
}

// substitution returns the substitutions for requests to host, or nil
// if no credential applies to it.
func (p *Proxy) substitution(host string) *substitution {
	creds := p.credentialsFor(host)
	if len(creds) == 0 {
		return nil
	}
	return newSubstitution(creds, or(p.MaxBufferedBody, DefaultMaxBufferedBody))
}

// logSubstitutions logs, at Debug, the number of placeholders replaced in
// a request to t.
func (cn *conn) logSubstitutions(t target, n int) {
	if n > 0 {
		cn.p.logger().Debug("egress credentials substituted", "host", t.host, "port", t.port, "count", n)
	}
}

// substitution replaces the placeholders of some credentials in
// requests to one host.
type substitution struct {
	header, body []Credential
	masks        []Credential // values to placeholders
	maxBuffered  int
}

// withheld returns s without its substitutions: it keeps only the masks,
// for a request to a host credentials apply to that may not carry them.
func (s *substitution) withheld() *substitution {
	return &substitution{masks: s.masks, maxBuffered: s.maxBuffered}
}

// carries reports whether req's header or query holds a placeholder that
// apply would replace. It leaves req as it is.
func (s *substitution) carries(req *http.Request) bool {
	u := *req.URL
	return s.applyHeader(req.Header.Clone())+s.applyQuery(&u) > 0
}

func newSubstitution(creds []Credential, maxBuffered int) *substitution {
	s := &substitution{maxBuffered: maxBuffered}
	for _, c := range creds {
		if c.Value != "" {
			// The other way round, for masking responses.
			s.masks = append(s.masks, Credential{Placeholder: c.Value, Value: c.Placeholder, Header: true, Body: true})
		}
		if c.Header {
			s.header = append(s.header, c)
		}
		if c.Body {
			s.body = append(s.body, c)
		}
	}
	return s
}

// apply substitutes in req's header, query and body, and returns the
// number of replacements made. For a body it streams, it returns the
// replacer, which counts its replacements as the body is read. A nil
// substitution does nothing.
func (s *substitution) apply(req *http.Request) (int, *replacer, error) {
	if s == nil {
		return 0, nil, nil
	}
	n := s.applyHeader(req.Header) + s.applyQuery(req.URL)
	if len(s.body) == 0 || req.Body == nil || req.Body == http.NoBody {
		return n, nil, nil
	}
	r := newReplacer(req.Body, s.body)
	if req.ContentLength < 0 || req.ContentLength > int64(s.maxBuffered) {
		// Length unknown or too large to hold: stream it, chunked.
		req.Body = struct {
			io.Reader
			io.Closer
		}{r, req.Body}
		req.ContentLength = -1
		req.Header.Del("Content-Length")
		return n, r, nil
	}
	b, err := io.ReadAll(r)
	req.Body.Close()
	if err != nil {
		return n, nil, fmt.Errorf("reading the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	return n + int(r.count.Load()), nil, nil
}

func (s *substitution) applyHeader(h http.Header) int {
	n := 0
	for name, vs := range h {
		for i, v := range vs {
			if name == "Authorization" {
				v, n = s.basicAuth(v, n)
			}
			for _, c := range s.header {
				n += strings.Count(v, c.Placeholder)
				v = strings.ReplaceAll(v, c.Placeholder, c.Value)
			}
			vs[i] = v
		}
	}
	return n
}

// basicAuth substitutes in the decoded user and password of Basic
// credentials, adding the replacements to n.
func (s *substitution) basicAuth(v string, n int) (string, int) {
	scheme, enc, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return v, n
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return v, n
	}
	plain := string(dec)
	for _, c := range s.header {
		n += strings.Count(plain, c.Placeholder)
		plain = strings.ReplaceAll(plain, c.Placeholder, c.Value)
	}
	if plain == string(dec) {
		return v, n
	}
	return scheme + " " + base64.StdEncoding.EncodeToString([]byte(plain)), n
}

func (s *substitution) applyQuery(u *url.URL) int {
	n := 0
	for _, c := range s.header {
		n += strings.Count(u.RawQuery, c.Placeholder)
		u.RawQuery = strings.ReplaceAll(u.RawQuery, c.Placeholder, url.QueryEscape(c.Value))
	}
	return n
}

// replacerChunk is how much a replacer reads from its source at a time.
const replacerChunk = 32 << 10

// A replacer streams src with the placeholders of creds replaced by
// their values, holding back only as many bytes as a placeholder split
// between two reads needs.
type replacer struct {
	src   io.Reader
	creds []Credential
	keep  int    // longest placeholder length - 1
	in    []byte // read from src, not yet replaced
	out   []byte // replaced; out[pos:] not yet returned
	pos   int
	err   error        // from src, returned once in and out are drained
	count atomic.Int64 // replacements made; Transport reads bodies in its own goroutine
}

func newReplacer(src io.Reader, creds []Credential) *replacer {
	r := &replacer{src: src, creds: creds}
	for _, c := range creds {
		r.keep = max(r.keep, len(c.Placeholder)-1)
	}
	r.in = make([]byte, 0, r.keep+replacerChunk)
	return r
}

func (r *replacer) Read(p []byte) (int, error) {
	for r.pos == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.fill()
	}
	n := copy(p, r.out[r.pos:])
	r.pos += n
	return n, nil
}

// fill reads once from src and moves from in to out, replaced, what can
// no longer be the start of a placeholder.
func (r *replacer) fill() {
	r.out, r.pos = r.out[:0], 0
	n, err := r.src.Read(r.in[len(r.in):cap(r.in)])
	r.in = r.in[:len(r.in)+n]
	if err != nil {
		r.err = err
	}
	// Every placeholder starting before limit ends within in.
	limit := len(r.in) - r.keep
	if r.err != nil {
		limit = len(r.in)
	}
	start := 0
	for {
		i, c := r.next(r.in[start:])
		if i < 0 || start+i >= limit {
			break
		}
		r.out = append(r.out, r.in[start:start+i]...)
		r.out = append(r.out, c.Value...)
		r.count.Add(1)
		start += i + len(c.Placeholder)
	}
	if limit > start {
		r.out = append(r.out, r.in[start:limit]...)
		start = limit
	}
	r.in = r.in[:copy(r.in, r.in[start:])]
}

// next finds the first placeholder in b, the longest if several start
// at the same place. It returns -1 if there is none.
func (r *replacer) next(b []byte) (int, Credential) {
	best, bc := -1, Credential{}
	for _, c := range r.creds {
		i := bytes.Index(b, []byte(c.Placeholder))
		if i >= 0 && (best < 0 || i < best || i == best && len(c.Placeholder) > len(bc.Placeholder)) {
			best, bc = i, c
		}
	}
	return best, bc
}
