package egress

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// encoder writes a body in content codings, the first applied first.
type encoder struct {
	w      io.Writer
	layers []interface {
		io.WriteCloser
		Flush() error
	}
}

func newEncoder(t *testing.T, w io.Writer, codings ...string) *encoder {
	e := &encoder{w: w}
	for i := len(codings) - 1; i >= 0; i-- { // the last applied writes to w
		var l interface {
			io.WriteCloser
			Flush() error
		}
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			l = gzip.NewWriter(e.w)
		case "deflate":
			l = zlib.NewWriter(e.w)
		case "raw deflate":
			l, err = flate.NewWriter(e.w, flate.DefaultCompression)
		default:
			t.Fatalf("coding %q", codings[i])
		}
		if err != nil {
			t.Fatal(err)
		}
		e.layers = append([]interface {
			io.WriteCloser
			Flush() error
		}{l}, e.layers...)
		e.w = l
	}
	return e
}

func (e *encoder) Write(p []byte) (int, error) { return e.w.Write(p) }

// flush pushes what was written through every layer.
func (e *encoder) flush() {
	for _, l := range e.layers {
		l.Flush()
	}
}

func (e *encoder) close() {
	for _, l := range e.layers {
		l.Close()
	}
}

// echoEncoded answers with the request's Authorization in a long body,
// encoded in codings (named in Content-Encoding as header says) and sent
// in two flushes that split the value, and records the request's
// Accept-Encoding.
func echoEncoded(t *testing.T, header string, codings []string, acceptEncoding chan<- string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		acceptEncoding <- r.Header.Get("Accept-Encoding")
		if header != "" {
			rw.Header().Set("Content-Encoding", header)
		}
		text := echoText(r.Header.Get("Authorization"))
		split := strings.Index(text, "Bearer ") + 7 + 5 // inside the value
		enc := newEncoder(t, rw, codings...)
		io.WriteString(enc, text[:split])
		enc.flush()
		rw.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) // the proxy reads the first part alone
		io.WriteString(enc, text[split:])
		enc.close()
	})
}

// echoText is the body echoEncoded sends for an Authorization value:
// longer than the replacer reads at once.
func echoText(auth string) string {
	return "you sent " + auth + " and " + strings.Repeat("padding ", replacerChunk/4) + "again " + auth
}

// TestMaskEncodedResponses: the credential's host echoes the value in a
// compressed body, whatever the request asked for, streamed in chunks
// that split it; the client gets the body decoded and masked, without
// a content coding, and the upstream was asked for identity.
func TestMaskEncodedResponses(t *testing.T) {
	tests := []struct {
		header  string
		codings []string
	}{
		{"gzip", []string{"gzip"}},
		{"x-gzip", []string{"x-gzip"}},
		{"deflate", []string{"deflate"}},
		{"Deflate", []string{"raw deflate"}},
		{"gzip, deflate", []string{"gzip", "deflate"}},
		{"identity", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			w := newWorld(t)
			accept := make(chan string, 1)
			api := w.serve(t, "api.test", echoEncoded(t, tt.header, tt.codings, accept))
			p := w.proxy(nil)
			p.MaskResponses = true
			c := w.client(t, startProxy(t, p))
			c.Transport.(*http.Transport).DisableCompression = true
			req, _ := http.NewRequest("GET", api, nil)
			req.Header.Set("Authorization", "Bearer "+placeholderA)
			req.Header.Set("Accept-Encoding", "gzip, br, zstd")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := body(t, resp)
			if ae := <-accept; ae != "identity" {
				t.Errorf("upstream was sent Accept-Encoding %q, want identity", ae)
			}
			if ce := resp.Header.Get("Content-Encoding"); ce != "" || resp.StatusCode != 200 {
				t.Fatalf("client got %s with Content-Encoding %q", resp.Status, ce)
			}
			if want := echoText("Bearer " + placeholderA); got != want {
				t.Errorf("client got %d bytes %.60q…, want %d bytes %.60q… (value in it: %v)",
					len(got), got, len(want), want, strings.Contains(got, valueA))
			}
		})
	}
}

// TestMaskRefusesUndecodableCodings: a body from the credential's host
// in a coding the proxy cannot decode is refused with a message of the
// proxy's own, which quotes no coding it does not know; a HEAD answer,
// which has no body, passes.
func TestMaskRefusesUndecodableCodings(t *testing.T) {
	tests := []struct{ coding, want string }{
		{"br", "the br content coding"},
		{"gzip, zstd", "the zstd content coding"},
		{"x-" + valueA, "an unrecognised content coding"},
		{"gzip, gzip, gzip, gzip, gzip", "5 stacked content codings"},
	}
	w := newWorld(t)
	coding := make(chan string, 1)
	api := w.serve(t, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Encoding", <-coding)
		io.WriteString(rw, "not really encoded: "+r.Header.Get("Authorization"))
	}))
	p := w.proxy(nil)
	p.MaskResponses = true
	c := w.client(t, startProxy(t, p))
	c.Transport.(*http.Transport).DisableCompression = true
	do := func(method string) *http.Response {
		req, _ := http.NewRequest(method, api, nil)
		req.Header.Set("Authorization", "Bearer "+placeholderA)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tt := range tests {
		coding <- tt.coding
		resp := do("GET")
		b := body(t, resp)
		if resp.StatusCode != 502 || !strings.HasPrefix(b, "reins egress proxy: api.test: the answer came in "+tt.want) ||
			strings.Contains(b, valueA) || strings.Contains(fmt.Sprint(resp.Header), valueA) {
			t.Errorf("Content-Encoding %q: %s %q", tt.coding, resp.Status, b)
		}
	}
	coding <- "br"
	if resp := do("HEAD"); resp.StatusCode != 200 {
		t.Errorf("HEAD with Content-Encoding br: %s", resp.Status)
	}
}

// TestMaskResponseHeadAndTrailers: a server that puts the value in its
// status text, a header name and a trailer shows the client the
// placeholder in each.
func TestMaskResponseHeadAndTrailers(t *testing.T) {
	w := newWorld(t)
	api := w.serve(t, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, brw, err := rw.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 200 OK %s\r\nX-Name-%s: 1\r\nTrailer: X-Echo\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"5\r\nhello\r\n0\r\nX-Echo: %s\r\n\r\n", v, v, v)
		brw.Flush()
	}))
	p := w.proxy(nil)
	p.MaskResponses = true
	c := w.client(t, startProxy(t, p))
	req, _ := http.NewRequest("GET", api, nil)
	req.Header.Set("Authorization", "Bearer "+placeholderA)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b := body(t, resp); b != "hello" {
		t.Errorf("body %q", b)
	}
	head := fmt.Sprint(resp.Status, resp.Header, resp.Trailer)
	if strings.Contains(head, valueA) || resp.Status != "200 OK "+placeholderA ||
		resp.Header.Get("X-Name-"+placeholderA) != "1" || resp.Trailer.Get("X-Echo") != placeholderA {
		t.Errorf("client saw %s", head)
	}
}

// TestDecodedStreams decodes what each coding makes of a body, read a
// few bytes at a time, and refuses a corrupt stream.
func TestDecodedStreams(t *testing.T) {
	text := strings.Repeat("0123456789", 10000)
	for _, codings := range [][]string{{"gzip"}, {"deflate"}, {"raw deflate"}, {"gzip", "deflate", "gzip"}} {
		var buf bytes.Buffer
		enc := newEncoder(t, &buf, codings...)
		io.WriteString(enc, text)
		enc.close()
		names := strings.Join(codings, ",")
		names = strings.ReplaceAll(names, "raw deflate", "deflate")
		got, err := io.ReadAll(bufio.NewReaderSize(decoded(&splitReader{chunkString(buf.String(), 7)}, strings.Split(names, ",")), 16))
		if err != nil || string(got) != text {
			t.Errorf("%v: %d bytes, %v", codings, len(got), err)
		}
	}
	if _, err := io.ReadAll(decoded(strings.NewReader("not gzip at all"), []string{"gzip"})); err == nil {
		t.Error("a corrupt gzip body decoded without an error")
	}
	if got, err := io.ReadAll(decoded(strings.NewReader(""), []string{"deflate"})); err != nil || len(got) != 0 {
		t.Errorf("empty deflate body: %q, %v", got, err)
	}
}

// FuzzDecodedMasked: a body in any of the codings the proxy decodes,
// read in pieces of any size, comes out decoded with the value masked;
// the same bytes taken for an encoded body, which they mostly are not,
// fail without a panic.
func FuzzDecodedMasked(f *testing.F) {
	f.Add("text with "+valueA+" inside", uint8(3), uint8(0))
	f.Add(valueA+valueA, uint8(1), uint8(2))
	f.Add("", uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, text string, split, coding uint8) {
		codings := [][]string{{"gzip"}, {"deflate"}, {"gzip", "deflate"}}[int(coding)%3]
		var buf bytes.Buffer
		enc := newEncoder(t, &buf, codings...)
		io.WriteString(enc, text)
		enc.close()
		masks := newSubstitution(testCredentials(), 0).masks
		pieces := chunkString(buf.String(), int(split%64)+1)
		got, err := io.ReadAll(newReplacer(decoded(&splitReader{pieces}, codings), masks))
		want := strings.ReplaceAll(strings.ReplaceAll(text, valueA, placeholderA), valueB, placeholderB)
		if err != nil || string(got) != want {
			t.Errorf("%v in pieces of %d: %q, %v; want %q", codings, split%64+1, got, err, want)
		}
		io.ReadAll(newReplacer(decoded(strings.NewReader(text), codings), masks))
	})
}

// chunkString cuts s into pieces of n bytes.
func chunkString(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// BenchmarkMaskedResponse times GETs of a 64 KiB body from a host with
// credentials through an intercepting proxy that masks responses: sent
// as it is, and gzip-encoded.
func BenchmarkMaskedResponse(b *testing.B) {
	plain := []byte(strings.Repeat("some response text that compresses well, ", 1600))[:64<<10]
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			w := newWorld(b)
			api := w.serve(b, "api.test", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if enc == "gzip" {
					rw.Header().Set("Content-Encoding", "gzip")
					rw.Write(gz.Bytes())
					return
				}
				rw.Write(plain)
			}))
			p := w.proxy(nil)
			p.MaskResponses = true
			c := w.client(b, startProxy(b, p))
			req, _ := http.NewRequest("GET", api, nil)
			req.Header.Set("Authorization", "Bearer "+placeholderA)
			b.SetBytes(int64(len(plain)))
			for b.Loop() {
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(len(plain)) {
					b.Fatalf("read %d bytes", n)
				}
			}
		})
	}
}
