// Package pkgmirror is a package mirror for tests: a loopback HTTP server
// that is a PyPI simple index (PEP 503), an npm registry and a Go module
// proxy, each serving one package it builds in memory, and that counts
// the packages' downloads. It is not for use outside tests.
package pkgmirror

import (
	"archive/zip"
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
	"strings"
	"sync"
	"testing"
)

// GoModule is the Go module the mirror serves at /go/ (GOPROXY
// protocol): v1.0.0, a command printing "hello from go".
const GoModule = "example.com/hello"

// A Mirror serves a Python package at version 1.0 and an npm package at
// version 1.0.0, both built by [BuildWheel] and [BuildTarball], and
// [GoModule] at v1.0.0.
type Mirror struct {
	// URL is the mirror's base URL as clients name it, e.g.
	// http://127.0.0.1:PORT; the npm registry's tarball URLs start with
	// it.
	URL string

	pyName, npmName string
	wheel, tgz      []byte
	srv             *httptest.Server

	mu        sync.Mutex     // guards downloads
	downloads map[string]int // by path
}

// New starts a mirror on 127.0.0.1, closed when t ends, that serves the
// Python package pyName and the npm package npmName. Clients name the
// mirror by host, or by 127.0.0.1 when host is empty.
func New(t testing.TB, host, pyName, npmName string) *Mirror {
	t.Helper()
	m := &Mirror{pyName: pyName, npmName: npmName, downloads: map[string]int{},
		wheel: BuildWheel(t, pyName), tgz: BuildTarball(t, npmName)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	if host == "" {
		host = "127.0.0.1"
	}
	m.URL = fmt.Sprintf("http://%s:%d", host, m.srv.Listener.Addr().(*net.TCPAddr).Port)
	return m
}

// PipIndexURL is the mirror's PyPI simple index, for pip --index-url.
func (m *Mirror) PipIndexURL() string { return m.URL + "/simple/" }

// NpmRegistry is the mirror's npm registry, for npm --registry.
func (m *Mirror) NpmRegistry() string { return m.URL + "/npm/" }

// GoProxy is the mirror's Go module proxy, for GOPROXY.
func (m *Mirror) GoProxy() string { return m.URL + "/go" }

// Fetched reports how often the wheel and the tarball were downloaded.
func (m *Mirror) Fetched() (wheel, tgz int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.downloads["/files/"+m.wheelName()], m.downloads["/npm/-/"+m.tgzName()]
}

func (m *Mirror) wheelName() string { return m.pyName + "-1.0-py3-none-any.whl" }
func (m *Mirror) tgzName() string   { return m.npmName + "-1.0.0.tgz" }

func (m *Mirror) serve(w http.ResponseWriter, r *http.Request) {
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
	case strings.HasPrefix(p, "/go/"+GoModule+"/@v/"):
		m.serveGo(w, strings.TrimPrefix(p, "/go/"+GoModule+"/@v/"))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"Not found"}`))
	}
}

// packument is the npm registry's document of the npm package.
func (m *Mirror) packument() any {
	sha := sha1.Sum(m.tgz)
	sri := sha512.Sum512(m.tgz)
	version := map[string]any{"name": m.npmName, "version": "1.0.0", "dist": map[string]any{
		"tarball":   m.NpmRegistry() + "-/" + m.tgzName(),
		"shasum":    hex.EncodeToString(sha[:]),
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sri[:]),
	}}
	return map[string]any{"name": m.npmName, "dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": version}}
}

func (m *Mirror) count(path string) {
	m.mu.Lock()
	m.downloads[path]++
	m.mu.Unlock()
}

func (m *Mirror) serveGo(w http.ResponseWriter, file string) {
	mod := "module " + GoModule + "\n\ngo 1.21\n"
	switch file {
	case "list":
		io.WriteString(w, "v1.0.0\n")
	case "v1.0.0.info":
		io.WriteString(w, `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`)
	case "v1.0.0.mod":
		io.WriteString(w, mod)
	case "v1.0.0.zip":
		m.count("go.zip")
		zw := zip.NewWriter(w)
		for name, body := range map[string]string{
			"go.mod":  mod,
			"main.go": "package main\n\nfunc main() { println(\"hello from go\") }\n",
		} {
			f, _ := zw.Create(GoModule + "@v1.0.0/" + name)
			io.WriteString(f, body)
		}
		zw.Close()
	default:
		http.NotFound(w, nil)
	}
}
