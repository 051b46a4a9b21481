// Package egress is the HTTP proxy through which sandboxed tools reach the
// network. It enforces an environment's network policy by host name and,
// through a netguard.Guard, refuses internal addresses whatever the
// policy says.
package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy is an environment's network policy as the proxy applies it.
type Policy struct {
	// Unrestricted permits every host name. The guard still refuses
	// internal addresses.
	Unrestricted bool
	// AllowedHosts are the hosts permitted when Unrestricted is false:
	// exact names ("example.com"), IP literals ("203.0.113.7"), or
	// "*.domain", which matches every name under domain but not domain
	// itself nor any IP literal. Matching ignores case and a trailing dot.
	// The caller composes the list: the environment's allowed_hosts plus,
	// as the environment asks, PackageRegistryHosts and MCP server hosts.
	AllowedHosts []string
}

// Permits reports whether the policy lets a tool reach host, a name or
// an IP literal without brackets or port.
func (p Policy) Permits(host string) bool {
	if p.Unrestricted {
		return true
	}
	host = normalizeHost(host)
	_, err := netip.ParseAddr(host)
	isIP := err == nil
	for _, a := range p.AllowedHosts {
		a = normalizeHost(a)
		switch {
		case a == host:
			return true
		case strings.HasPrefix(a, "*."):
			if !isIP && strings.HasSuffix(host, a[1:]) {
				return true
			}
		}
	}
	return false
}

// CheckHost reports whether h can be an entry of a host list
// (Policy.AllowedHosts, Credential.Hosts, Proxy.CleartextHosts): a host
// name, an IP address or "*.domain", without a scheme, port or path.
func CheckHost(h string) error {
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if !validHost(name) || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("%q is not a host name, an IP address or *.domain", h)
	}
	return nil
}

// normalizeHost lower-cases host and drops one trailing dot. An IP
// literal is put in its canonical form.
func normalizeHost(host string) string {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String()
	}
	return host
}

// PackageRegistryHosts returns the hosts of the public package registries
// an environment with allow_package_managers may reach: PyPI, npm and
// Yarn, the Go module proxy and checksum database, crates.io, RubyGems,
// and the Debian and Ubuntu archives. It returns a new slice each time.
func PackageRegistryHosts() []string {
	return []string{
		"pypi.org", "files.pythonhosted.org",
		"registry.npmjs.org", "registry.yarnpkg.com",
		"proxy.golang.org", "sum.golang.org",
		"crates.io", "index.crates.io", "static.crates.io",
		"rubygems.org", "index.rubygems.org",
		"deb.debian.org", "security.debian.org",
		"archive.ubuntu.com", "security.ubuntu.com",
	}
}
