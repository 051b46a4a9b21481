package netguard

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		ip   string
		want string // substring of the description; "" means permitted
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.1.2", "loopback"},
		{"::1", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"::", "unspecified"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.8", "IETF"},
		{"192.0.2.1", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"2001:db8::1", "documentation"},
		{"::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, a loopback"},
		{"::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254, a link-local"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::7f00:1", "NAT64 form of 127.0.0.1, a loopback"},
		{"64:ff9b::10.0.0.1", "NAT64 form of 10.0.0.1, a private"},
		{"2002:7f00:1::1", "6to4 form of 127.0.0.1, a loopback"},
		{"2002:a9fe:a9fe::", "6to4 form of 169.254.169.254"},
		{"2001:0:4136:e378::1", "Teredo"},
		{"::ffff:0:7f00:1", "not a global unicast"},
		{"100::1", "discard"},

		{"1.1.1.1", ""},
		{"8.8.8.8", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:1.1.1.1", ""},
		{"64:ff9b::1.1.1.1", ""},
		{"2002:0101:0101::1", ""},
	}
	for _, tt := range tests {
		got := Classify(netip.MustParseAddr(tt.ip))
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("Classify(%s) = %q, want %q", tt.ip, got, tt.want)
		}
	}
}

func TestNameReason(t *testing.T) {
	refused := []string{
		"localhost", "foo.localhost", "metadata", "metadata.google.internal",
		"db.internal", "printer.local", "0x7f000001", "2130706433",
		"0177.0.0.1", "127.1", "127.0.1", "0x7f.0.0.1", "0", "017700000001",
		"1.2.3.4.5", "example.123", "router.home.arpa",
	}
	for _, h := range refused {
		if nameReason(h) == "" {
			t.Errorf("nameReason(%q) = \"\", want a refusal", h)
		}
	}
	permitted := []string{"example.com", "cafe.de", "0xcafe.de", "1password.com", "123.example.com", "a-0x1.io"}
	for _, h := range permitted {
		if why := nameReason(h); why != "" {
			t.Errorf("nameReason(%q) = %q, want \"\"", h, why)
		}
	}
}

func TestParseInetAton(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means not an inet_aton form
	}{
		{"0x7f000001", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.0x10.0xffff", "10.16.255.255"},
		{"0x", "0.0.0.0"},
		{"1.2.3.4", "1.2.3.4"},
		{"256.0.0.1", ""},
		{"1.256.1", ""},
		{"4294967296", ""},
		{"08.0.0.1", ""},
		{"1..2", ""},
		{"1.2.3.4.5", ""},
		{"-1", ""},
		{"+1", ""},
		{"example.com", ""},
	}
	for _, tt := range tests {
		ip, ok := parseInetAton(tt.in)
		got := ""
		if ok {
			got = ip.String()
		}
		if got != tt.want {
			t.Errorf("parseInetAton(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzClassify checks Classify against the standard library's own
// predicates: whatever it calls loopback, private, link-local, multicast
// or unspecified (directly or inside an IPv4-mapped address) must be
// refused, and whatever Classify permits must be global unicast.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "fe80::1%lo", "10.0.0.1", "1.1.1.1", "2606:4700::1", "::", "ff02::1", "64:ff9b::7f00:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return
		}
		why := Classify(ip)
		u := ip.WithZone("").Unmap()
		special := u.IsLoopback() || u.IsPrivate() || u.IsLinkLocalUnicast() ||
			u.IsLinkLocalMulticast() || u.IsInterfaceLocalMulticast() || u.IsMulticast() || u.IsUnspecified()
		if special && why == "" {
			t.Fatalf("Classify(%s) permits a special address", s)
		}
		if why == "" && !u.IsGlobalUnicast() {
			t.Fatalf("Classify(%s) permits an address that is not global unicast", s)
		}
		g := Guard{}
		if (g.CheckIP(ip) == nil) != (why == "") {
			t.Fatalf("CheckIP(%s) disagrees with Classify %q", s, why)
		}
	})
}
