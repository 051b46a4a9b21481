package packages

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/reinsdev/reins/internal/pkgmirror"
	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// mirrorHost names the test mirror. Only the egress proxy's resolver
// knows it (as 127.0.0.1): the package managers in the sandbox reach it
// through the proxy, the way they reach a real registry.
const mirrorHost = "mirror.test"

// newMirror starts a mirror named mirrorHost serving pyName and npmName.
func newMirror(t *testing.T, pyName, npmName string) *pkgmirror.Mirror {
	t.Helper()
	return pkgmirror.New(t, mirrorHost, pyName, npmName)
}

// mirrorEgress serves the install sandboxes' proxy: it lets them reach
// the mirror, on the host's loopback, by its name.
func mirrorEgress(ln net.Listener) {
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
