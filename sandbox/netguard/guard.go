package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver
// implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// DeniedError reports a destination the guard refuses.
type DeniedError struct {
	Host   string     // the host as given: a name or an IP literal
	IP     netip.Addr // the refused address; invalid if the name itself was refused
	Reason string     // a readable sentence, e.g. "127.0.0.1 is a loopback address"
	// Hint, if set, tells how the address could be allowed, e.g. "an
	// operator can allow it with --outbound-allow"; see [Guard.Hint].
	Hint string
}

func (e *DeniedError) Error() string {
	msg := "netguard: " + e.Reason
	if e.IP.IsValid() && e.Host != e.IP.String() {
		msg = fmt.Sprintf("netguard: %s resolves to a forbidden address: %s", e.Host, e.Reason)
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// A Guard checks destinations and dials only permitted ones. The zero
// Guard refuses every special-purpose address and uses
// net.DefaultResolver. A Guard is safe for concurrent use and must not be
// modified once in use.
type Guard struct {
	// Allow lists prefixes the operator permits even though Classify
	// forbids them, for example a private network the sandboxes may reach.
	// It applies to addresses only: names such as localhost, *.internal
	// and numeric forms such as 0x7f000001 stay refused; dial the address.
	Allow []netip.Prefix
	// Resolver looks up host names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds each connection attempt; 0 means 30 seconds.
	DialTimeout time.Duration
	// Hint, if set, is given with every refused address (not with refused
	// names, which Allow cannot permit) as DeniedError.Hint: how an
	// operator would allow it.
	Hint string
}

// ParseAllow parses operator allowlist entries, each a CIDR prefix
// ("10.0.0.0/8", "fd00::/8") or a single address ("127.0.0.1").
func ParseAllow(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := parseAllowEntry(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("netguard: allow entry %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func parseAllowEntry(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, errors.New("empty; want a CIDR prefix such as 10.0.0.0/8 or an address such as 127.0.0.1")
	}
	if !strings.Contains(s, "/") {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an IP address or CIDR prefix: %w", err)
		}
		if ip.Zone() != "" {
			return netip.Prefix{}, errors.New("an address with a zone cannot be allowed; drop the %zone")
		}
		return netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR prefix: %w", err)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("has bits set past the /%d mask; did you mean %s?", p.Bits(), p.Masked())
	}
	return p, nil
}

// CheckIP returns nil if ip may be dialled, or a *DeniedError.
func (g *Guard) CheckIP(ip netip.Addr) error {
	if d := g.deny(ip); d != nil {
		return d
	}
	return nil
}

// deny returns the refusal of ip, or nil if ip may be dialled.
func (g *Guard) deny(ip netip.Addr) *DeniedError {
	if g.allowed(ip) {
		return nil
	}
	if why := Classify(ip); why != "" {
		return &DeniedError{Host: ip.String(), IP: ip, Reason: ip.String() + " is " + why, Hint: g.Hint}
	}
	return nil
}

// allowed reports whether an operator prefix holds ip (or, for an
// IPv4-mapped address, the IPv4 address inside it).
func (g *Guard) allowed(ip netip.Addr) bool {
	ip = ip.WithZone("")
	for _, p := range g.Allow {
		if p.Contains(ip) || p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// Resolve returns the addresses of host (a name or an IP literal) after
// checking every one of them: if any address is forbidden the whole name
// is refused with a *DeniedError, so a name cannot smuggle a private
// address in among public ones. Names for the local machine, private
// suffixes such as .internal and numeric forms such as 0x7f000001 are
// refused without a lookup.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(name); err == nil {
		if err := g.CheckIP(ip); err != nil {
			return nil, err
		}
		return []netip.Addr{ip}, nil
	}
	if why := nameReason(name); why != "" {
		return nil, &DeniedError{Host: host, Reason: host + " is " + why}
	}
	ips, err := g.resolver().LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, fmt.Errorf("netguard: look up %s: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("netguard: look up %s: no addresses", host)
	}
	for i, ip := range ips {
		if d := g.deny(ip); d != nil {
			d.Host = host
			return nil, d
		}
		ips[i] = ip.Unmap()
	}
	return ips, nil
}

func (g *Guard) resolver() Resolver {
	if g.Resolver == nil {
		return net.DefaultResolver
	}
	return g.Resolver
}

// DialContext connects to address ("host:port") over TCP or UDP, like
// net.Dialer.DialContext, but only to addresses the guard permits. It
// resolves the host once, checks every address, and dials the checked
// addresses themselves, so a second lookup cannot return something else.
// The address actually connected is checked again just before connecting.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, fmt.Errorf("netguard: dial %s: unsupported network %q", address, network)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", address, err)
	}
	ips, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: g.dialTimeout(), Control: g.control}
	var errs []error
	for _, ip := range ips {
		if !familyMatches(network, ip) {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("netguard: dial %s: no %s address for %s", address, network, host)
	}
	return nil, errors.Join(errs...)
}

func (g *Guard) dialTimeout() time.Duration {
	if g.DialTimeout <= 0 {
		return 30 * time.Second
	}
	return g.DialTimeout
}

// control is the net.Dialer.Control hook: the last check, on the address
// the socket is about to connect to.
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: connect to %s: %w", address, err)
	}
	return g.CheckIP(ap.Addr())
}

func familyMatches(network string, ip netip.Addr) bool {
	switch network[len(network)-1] {
	case '4':
		return ip.Is4()
	case '6':
		return ip.Is6()
	}
	return true
}

// Transport returns a new http.Transport that connects only through g and
// never through a proxy from the environment. Every connection it opens,
// including those for redirects, passes the guard.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
