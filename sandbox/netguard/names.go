package netguard

import (
	"net/netip"
	"strconv"
	"strings"
)

// localNames are names refused before any lookup: they name the local
// machine or a cloud metadata service on every platform that has them.
var localNames = map[string]bool{
	"localhost":                true,
	"localhost.localdomain":    true,
	"ip6-localhost":            true,
	"ip6-loopback":             true,
	"metadata":                 true,
	"metadata.google.internal": true,
	"instance-data":            true,
}

// localSuffixes are name suffixes that only resolve inside a private
// network (RFC 6761 .localhost, mDNS .local, the .internal TLD reserved
// for private use).
var localSuffixes = []string{".localhost", ".local", ".internal", ".localdomain", ".home.arpa"}

// nameReason describes why a host name (not an IP literal) is refused, or
// returns "" if it may be looked up. host must be lower case without a
// trailing dot.
func nameReason(host string) string {
	switch {
	case host == "":
		return "an empty host name"
	case localNames[host]:
		return "a name for the local machine or a metadata service"
	}
	for _, s := range localSuffixes {
		if strings.HasSuffix(host, s) {
			return "a name under " + s + ", which only resolves on a private network"
		}
	}
	if ip, ok := parseInetAton(host); ok {
		return "a non-canonical numeric form of " + ip.String()
	}
	if last := host[strings.LastIndexByte(host, '.')+1:]; isNumericPart(last) {
		return "not a valid host name (its last label is numeric)"
	}
	return ""
}

// parseInetAton parses s the way the C library's inet_aton does: one to
// four dot-separated parts, each decimal, octal (leading 0) or hexadecimal
// (leading 0x), the last part filling the remaining bytes. Resolvers that
// fall back to inet_aton turn such names into addresses without DNS, so
// they must be caught before a lookup.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 0xff {
				return netip.Addr{}, false
			}
			v = v<<8 | n
			continue
		}
		rest := 8 * uint(4-i) // bits left for the last part
		if n >= 1<<rest {
			return netip.Addr{}, false
		}
		v = v<<rest | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseAtonPart parses one inet_aton part with C's base-0 rules.
func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case len(p) > 2 && (p[:2] == "0x" || p[:2] == "0X"):
		p, base = p[2:], 16
	case p == "0x" || p == "0X":
		return 0, true // C's strtoul reads "0x" as 0
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" || p[0] == '+' || p[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// isNumericPart reports whether p would be read as a number by
// parseAtonPart.
func isNumericPart(p string) bool {
	_, ok := parseAtonPart(p)
	return ok
}
