package cli

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFirstStartWildcardAddr: a server listening on every address
// (":PORT", "0.0.0.0:PORT") prints URLs a client on this machine can use,
// and its hints work as printed.
func TestFirstStartWildcardAddr(t *testing.T) {
	// (The subtests' names are in the data dir's path: not the addresses.)
	for _, c := range []struct{ name, host, want string }{{"port only", "", "127.0.0.1"}, {"any IPv4", "0.0.0.0", "127.0.0.1"}} {
		t.Run(c.name, func(t *testing.T) {
			_, port, _ := net.SplitHostPort(freePort(t))
			env := reinsEnv(t, reinsDir(t), "HOME="+t.TempDir())
			s := startServe(t, env, net.JoinHostPort(c.host, port), filepath.Join(t.TempDir(), "data"))
			defer s.stop()
			want := "http://" + net.JoinHostPort(c.want, port)
			got := s.waitFor(`reins is serving the Managed Agents API at (\S+)`, 10*time.Second)[1]
			if got != want {
				t.Errorf("banner URL %q, want %q", got, want)
			}
			curl := s.waitFor(`(?m)^    (curl [^\r\n]*)\r?$`, 10*time.Second)[1]
			out := s.output()
			if strings.Contains(out, "[::]") || strings.Contains(out, "0.0.0.0") || !strings.Contains(curl, want+"/v1/agents") {
				t.Errorf("the banner names an unreachable address:\n%s", out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if out, err := shell(t, ctx, env, t.TempDir(), curl); err != nil || !strings.Contains(out, `"demo"`) {
				t.Fatalf("the curl hint did not work: %v\n%s", err, out)
			}
		})
	}
}

// TestReachableURL: what the banner prints for each form of --addr (IPv6
// may be absent here, so an IPv6 listener is not bound).
func TestReachableURL(t *testing.T) {
	for _, c := range []struct {
		addr  string
		bound net.Addr
		want  string
	}{
		{":8080", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", &net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "http://127.0.0.1:8080"},
		{"[::]:8080", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://localhost:8080"},
		{"127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4180}, "http://127.0.0.1:4180"},
		{"[::1]:4180", &net.TCPAddr{IP: net.IPv6loopback, Port: 4180}, "http://[::1]:4180"},
	} {
		if got := reachableURL("http", c.addr, c.bound); got != c.want {
			t.Errorf("reachableURL(%q, %v) = %q, want %q", c.addr, c.bound, got, c.want)
		}
	}
}

// TestServeSecondOnSameDataDir: a second `reins serve` on a data dir in
// use is refused naming the first (its pid and URL), whether it asks for
// the first's port (it would otherwise fail on "address already in use")
// or another one.
func TestServeSecondOnSameDataDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := freePort(t)
	s := startServe(t, reinsEnv(t, reinsDir(t), "HOME="+t.TempDir()), addr, dataDir)
	defer s.stop()
	for _, second := range []string{addr, freePort(t)} {
		r := execute(context.Background(), "", "serve", "--addr", second, "--data-dir", dataDir, "--sandbox", "none")
		if r.err == nil {
			t.Fatalf("a second serve on %s started", second)
		}
		msg := r.err.Error()
		for _, want := range []string{"in use by another reins serve", fmt.Sprintf("pid %d", s.cmd.Process.Pid), "serving http://" + addr} {
			if !strings.Contains(msg, want) {
				t.Errorf("second serve on %s: %q lacks %q", second, msg, want)
			}
		}
	}
}
