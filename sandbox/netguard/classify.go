// Package netguard decides which network destinations reins may connect
// to on behalf of someone else (a sandboxed tool, an MCP server URL, an
// OAuth token endpoint) and provides a dialer that refuses the rest.
//
// Loopback, private, link-local, shared (CGNAT), multicast, broadcast,
// documentation and reserved addresses are forbidden, and so are IPv6
// forms that carry a forbidden IPv4 address inside them. An operator can
// allow chosen prefixes with [Guard.Allow].
package netguard

import (
	"net/netip"
)

// special is one special-purpose range and the description Classify gives
// for it.
type special struct {
	prefix netip.Prefix
	what   string
}

func sp(prefix, what string) special {
	return special{netip.MustParsePrefix(prefix), what}
}

// v4Special lists the IPv4 ranges that are not reachable public unicast
// destinations (IANA IPv4 Special-Purpose Address Registry, trimmed to the
// ranges that are not globally reachable).
var v4Special = []special{
	sp("255.255.255.255/32", "a broadcast address"),
	sp("0.0.0.0/32", "an unspecified address"),
	sp("0.0.0.0/8", `a "this network" address`),
	sp("10.0.0.0/8", "a private address"),
	sp("100.64.0.0/10", "a shared (CGNAT) address"),
	sp("127.0.0.0/8", "a loopback address"),
	sp("169.254.0.0/16", "a link-local address"),
	sp("172.16.0.0/12", "a private address"),
	sp("192.0.0.0/24", "an IETF protocol assignment address"),
	sp("192.0.2.0/24", "a documentation address"),
	sp("192.88.99.0/24", "a deprecated 6to4 relay address"),
	sp("192.168.0.0/16", "a private address"),
	sp("198.18.0.0/15", "a benchmarking address"),
	sp("198.51.100.0/24", "a documentation address"),
	sp("203.0.113.0/24", "a documentation address"),
	sp("224.0.0.0/4", "a multicast address"),
	sp("240.0.0.0/4", "a reserved address"),
}

// v6Special lists the IPv6 ranges refused outright. Ranges that embed an
// IPv4 address (mapped, NAT64, 6to4) are handled by embedded4 instead.
var v6Special = []special{
	sp("::/128", "an unspecified address"),
	sp("::1/128", "a loopback address"),
	sp("::/96", "an IPv4-compatible IPv6 address"),
	sp("64:ff9b:1::/48", "a local-use NAT64 address"),
	sp("100::/64", "a discard-only address"),
	sp("2001::/32", "a Teredo address"),
	sp("2001:2::/48", "a benchmarking address"),
	sp("2001:10::/28", "a deprecated ORCHID address"),
	sp("2001:db8::/32", "a documentation address"),
	sp("3fff::/20", "a documentation address"),
	sp("5f00::/16", "a segment routing (SRv6) address"),
	sp("fc00::/7", "a unique local (private) address"),
	sp("fe80::/10", "a link-local address"),
	sp("fec0::/10", "a deprecated site-local address"),
	sp("ff00::/8", "a multicast address"),
}

// globalUnicast6 is the only IPv6 range allocated for global unicast.
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// embedding is an IPv6 range that carries an IPv4 address in its bits.
type embedding struct {
	prefix netip.Prefix
	what   string
	offset int // byte offset of the IPv4 address in the 16-byte form
}

var embeddings = []embedding{
	{netip.MustParsePrefix("::ffff:0:0/96"), "an IPv4-mapped form", 12},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 form", 12},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 form", 2},
}

// Classify describes why ip is not a public unicast destination, as a
// phrase that completes "<ip> is ...", for example "a loopback address"
// or "an IPv4-mapped form of 127.0.0.1, a loopback address". It returns ""
// for an address that may be dialled. A zone is ignored; an invalid
// address is described as such.
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not a valid IP address"
	}
	ip = ip.WithZone("")
	if ip.Is4() {
		return lookup(v4Special, ip)
	}
	for _, e := range embeddings {
		if e.prefix.Contains(ip) {
			b := ip.As16()
			v4 := netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))
			if why := lookup(v4Special, v4); why != "" {
				return e.what + " of " + v4.String() + ", " + why
			}
			return ""
		}
	}
	if why := lookup(v6Special, ip); why != "" {
		return why
	}
	if !globalUnicast6.Contains(ip) {
		return "not a global unicast address"
	}
	return ""
}

// lookup returns the description of the first range in table holding ip.
func lookup(table []special, ip netip.Addr) string {
	for _, s := range table {
		if s.prefix.Contains(ip) {
			return s.what
		}
	}
	return ""
}
