package egress

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// maxCodings is the most content codings a masked response may stack.
const maxCodings = 4

// knownCodings are registered content codings the proxy does not decode:
// a refusal names them, while any other coding a server sends is
// described, not quoted, so that no upstream text reaches the client.
var knownCodings = []string{"br", "zstd", "compress", "x-compress", "dcb", "dcz", "exi", "pack200-gzip", "aes128gcm"}

// A codingError refuses a response whose content coding the proxy
// cannot decode, and so cannot mask.
type codingError struct {
	coding string // a name from knownCodings, or ""
	layers int    // set when too many codings are stacked
}

func (e *codingError) Error() string {
	var what string
	switch {
	case e.layers > 0:
		what = fmt.Sprintf("%d stacked content codings (at most %d are decoded)", e.layers, maxCodings)
	case e.coding != "":
		what = "the " + e.coding + " content coding"
	default:
		what = "an unrecognised content coding"
	}
	return "the answer came in " + what + ", which this proxy cannot inspect for credential values; " +
		"a host credentials apply to must answer in gzip, deflate or no content coding"
}

// contentCodings returns the content codings of a response's body in the
// order they were applied, leaving out identity, or a *codingError if
// the proxy cannot decode them.
func contentCodings(h http.Header) ([]string, error) {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "gzip", "x-gzip", "deflate":
				out = append(out, c)
			default:
				if !slices.Contains(knownCodings, c) {
					c = ""
				}
				return nil, &codingError{coding: c}
			}
		}
	}
	if len(out) > maxCodings {
		return nil, &codingError{layers: len(out)}
	}
	return out, nil
}

// maskResponse replaces credential values with their placeholders in
// all that resp carries to the client: its status text, header names and
// values, body and trailers. A body in gzip or deflate is decoded as it
// streams and sent without a content coding; a body is sent chunked. If
// the body is in a coding the proxy cannot decode, maskResponse changes
// nothing and returns a *codingError.
func (s *substitution) maskResponse(resp *http.Response, method string) error {
	if len(s.masks) == 0 {
		return nil
	}
	hasBody := method != http.MethodHead && resp.StatusCode != http.StatusNoContent &&
		resp.StatusCode != http.StatusNotModified && resp.StatusCode >= 200 && resp.ContentLength != 0 && resp.Body != nil
	var codings []string
	if hasBody {
		var err error
		if codings, err = contentCodings(resp.Header); err != nil {
			return err
		}
	}
	resp.Status = s.maskString(resp.Status)
	s.maskHeader(resp.Header)
	s.maskHeader(resp.Trailer) // the names it declares; values come after the body
	if !hasBody {
		return nil
	}
	resp.Header.Del("Content-Encoding")
	resp.Body = maskedBody{
		Reader: newReplacer(decoded(resp.Body, codings), s.masks),
		body:   resp.Body,
		after:  func() { s.maskHeader(resp.Trailer) },
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	resp.TransferEncoding = []string{"chunked"}
	return nil
}

// maskString replaces credential values in v with their placeholders.
func (s *substitution) maskString(v string) string {
	for _, m := range s.masks {
		v = strings.ReplaceAll(v, m.Placeholder, m.Value)
	}
	return v
}

// maskHeader masks the names and values of h in place.
func (s *substitution) maskHeader(h http.Header) {
	var renamed []string
	for name, vs := range h {
		for i, v := range vs {
			vs[i] = s.maskString(v)
		}
		if s.maskName(name) != name {
			renamed = append(renamed, name)
		}
	}
	for _, name := range renamed {
		vs := h[name]
		delete(h, name)
		masked := s.maskName(name) // not canonicalised: that would change the placeholder
		h[masked] = append(h[masked], vs...)
	}
}

// maskName masks a header name, ignoring case: the transport has
// canonicalised the name's case, and with it the value's.
func (s *substitution) maskName(name string) string {
	for _, m := range s.masks {
		for i := indexFold(name, m.Placeholder, 0); i >= 0; i = indexFold(name, m.Placeholder, i+len(m.Value)) {
			name = name[:i] + m.Value + name[i+len(m.Placeholder):]
		}
	}
	return name
}

// indexFold returns the index of the first sub in s at or after from,
// ignoring case, or -1. It allocates nothing: it runs on every header
// name of every masked response.
func indexFold(s, sub string, from int) int {
	for i := from; sub != "" && i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// maskedBody is a response body read through the masking replacer.
// Closing it closes the upstream body and then calls after, which masks
// the trailers the transport has read by then: Response.Write closes the
// body before it writes the trailers.
type maskedBody struct {
	io.Reader
	body  io.Closer
	after func()
}

func (b maskedBody) Close() error {
	err := b.body.Close()
	b.after()
	return err
}

// decoded returns body decoded from codings, the content codings applied
// to it in order. It reads nothing before it is read, so that a response
// header is not held back waiting for the body.
func decoded(body io.Reader, codings []string) io.Reader {
	r := body
	for _, c := range slices.Backward(codings) {
		r = &lazyDecoder{src: r, coding: c}
	}
	return r
}

// A lazyDecoder decodes src from one content coding, starting the
// decoder, which reads the coding's header, on the first Read.
type lazyDecoder struct {
	src    io.Reader
	coding string
	r      io.Reader
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.r == nil {
		r, err := newDecoder(d.src, d.coding)
		if err != nil {
			return 0, err
		}
		d.r = r
	}
	return d.r.Read(p)
}

// newDecoder starts decoding src from coding (gzip, x-gzip or deflate).
// Each decoder holds a fixed window (32 KiB), whatever the body's size.
func newDecoder(src io.Reader, coding string) (io.Reader, error) {
	if coding != "deflate" {
		return gzip.NewReader(src)
	}
	// HTTP's deflate is a zlib stream, yet some servers send raw
	// deflate: a zlib header tells them apart.
	br := bufio.NewReader(src)
	b, err := br.Peek(2)
	switch {
	case len(b) == 0 && err == io.EOF:
		return br, nil // an empty body
	case len(b) == 2 && b[0]&0x0f == 8 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0:
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}
