package packages

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/reinsdev/reins/internal/egress"
	"github.com/reinsdev/reins/internal/netguard"
)

// mirrorHost names the test mirror. Only the egress proxy's resolver
// knows it (as 127.0.0.1): the package managers in the sandbox reach it
// through the proxy, the way they reach a real registry.
const mirrorHost = "mirror.test"

// mirror is a loopback PyPI simple index and npm registry, each serving
// one package at version 1.0 / 1.0.0.
type mirror struct {
	srv  *httptest.Server
	base string // http://mirror.test:port

	wheel, tgz []byte
	pyName     string // the Python package (and distribution) name
	npmName    string

	mu        sync.Mutex
	downloads map[string]int // by path
}

func newMirror(t *testing.T, pyName, npmName string) *mirror {
	t.Helper()
	m := &mirror{pyName: pyName, npmName: npmName, downloads: map[string]int{},
		wheel: buildWheel(t, pyName), tgz: buildTarball(t, npmName)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	m.base = fmt.Sprintf("http://%s:%d", mirrorHost, m.srv.Listener.Addr().(*net.TCPAddr).Port)
	return m
}

func (m *mirror) wheelName() string { return m.pyName + "-1.0-py3-none-any.whl" }
func (m *mirror) tgzName() string   { return m.npmName + "-1.0.0.tgz" }

func (m *mirror) serve(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/simple/"+m.pyName+"/":
		sum := sha256.Sum256(m.wheel)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n",
			m.wheelName(), hex.EncodeToString(sum[:]), m.wheelName())
	case p == "/files/"+m.wheelName():
		m.count(p)
		w.Write(m.wheel)
	case p == "/npm/"+m.npmName:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m.packument())
	case p == "/npm/-/"+m.tgzName():
		m.count(p)
		w.Write(m.tgz)
	case strings.HasPrefix(p, "/go/"+goModule+"/@v/"):
		m.serveGo(w, strings.TrimPrefix(p, "/go/"+goModule+"/@v/"))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"Not found"}`))
	}
}

func (m *mirror) packument() any {
	sha := sha1.Sum(m.tgz)
	sri := sha512.Sum512(m.tgz)
	version := map[string]any{"name": m.npmName, "version": "1.0.0", "dist": map[string]any{
		"tarball":   m.base + "/npm/-/" + m.tgzName(),
		"shasum":    hex.EncodeToString(sha[:]),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sri[:]),
	}}
	return map[string]any{"name": m.npmName, "dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": version}}
}

func (m *mirror) count(path string) {
	m.mu.Lock()
	m.downloads[path]++
	m.mu.Unlock()
}

// fetched reports how often the wheel and the tarball were downloaded.
func (m *mirror) fetched() (wheel, tgz int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.downloads["/files/"+m.wheelName()], m.downloads["/npm/-/"+m.tgzName()]
}

// egress serves the install sandboxes' proxy: it lets them reach the
// mirror, on the host's loopback, by its name.
func (m *mirror) egress(ln net.Listener) {
	loopback := netip.MustParsePrefix("127.0.0.1/32")
	p := &egress.Proxy{Policy: egress.Policy{Unrestricted: true},
		Guard: &netguard.Guard{Allow: []netip.Prefix{loopback}, Resolver: resolver{mirrorHost: netip.MustParseAddr("127.0.0.1")}}}
	p.Serve(context.Background(), ln)
}

// resolver answers lookups from a table, standing in for DNS.
type resolver map[string]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// buildWheel makes a pure-Python wheel of name 1.0 whose module sets
// VALUE = 42.
func buildWheel(t *testing.T, name string) []byte {
	t.Helper()
	info := name + "-1.0.dist-info/"
	files := []struct{ name, body string }{
		{name + "/__init__.py", "VALUE = 42\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: reins-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "RECORD,,\n")
	w, _ := zw.Create(info + "RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// buildTarball makes an npm package tarball of name 1.0.0 whose module
// exports {value: 42}.
func buildTarball(t *testing.T, name string) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"package/package.json", fmt.Sprintf(`{"name":%q,"version":"1.0.0","main":"index.js"}`, name)},
		{"package/index.js", "module.exports = {value: 42};\n"},
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// goModule is the Go module the mirror serves (GOPROXY protocol, at
// /go/): v1.0.0, a command printing "hello from go".
const goModule = "example.com/hello"

func (m *mirror) serveGo(w http.ResponseWriter, file string) {
	switch file {
	case "list":
		io.WriteString(w, "v1.0.0\n")
	case "v1.0.0.info":
		io.WriteString(w, `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`)
	case "v1.0.0.mod":
		io.WriteString(w, "module "+goModule+"\n\ngo 1.21\n")
	case "v1.0.0.zip":
		m.count("go.zip")
		zw := zip.NewWriter(w)
		for name, body := range map[string]string{
			"go.mod":  "module " + goModule + "\n\ngo 1.21\n",
			"main.go": "package main\n\nfunc main() { println(\"hello from go\") }\n",
		} {
			f, _ := zw.Create(goModule + "@v1.0.0/" + name)
			io.WriteString(f, body)
		}
		zw.Close()
	default:
		http.NotFound(w, nil)
	}
}
