package turntoken

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newIssuer(t testing.TB, ttl time.Duration) *Issuer {
	t.Helper()
	is, err := New(testKey, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return is
}

func TestIssueVerify(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		is := newIssuer(t, 0)
		tok, exp, err := is.Issue(Tools, "sesn_1", "turn_1")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, "rtt_") {
			t.Errorf("token %q: want the rtt_ prefix", tok)
		}
		if want := time.Now().Add(DefaultTTL); !exp.Equal(want) {
			t.Errorf("expires at %v, want %v", exp, want)
		}
		c, err := is.Verify(Tools, tok)
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != Tools || c.SessionID != "sesn_1" || c.TurnID != "turn_1" || !c.ExpiresAt.Equal(exp) {
			t.Errorf("claims %+v", c)
		}
		// Another replica with the same master key verifies it.
		if _, err := newIssuer(t, 0).Verify(Tools, tok); err != nil {
			t.Errorf("same master key: %v", err)
		}
		time.Sleep(DefaultTTL - time.Second)
		if _, err := is.Verify(Tools, tok); err != nil {
			t.Errorf("a second before expiry: %v", err)
		}
		time.Sleep(time.Second)
		if _, err := is.Verify(Tools, tok); !errors.Is(err, ErrExpired) {
			t.Errorf("at expiry: %v, want ErrExpired", err)
		}
	})
}

func TestVerifyRefuses(t *testing.T) {
	is := newIssuer(t, time.Minute)
	tools, _, _ := is.Issue(Tools, "sesn_1", "turn_1")
	mdl, _, _ := is.Issue(Model, "sesn_1", "turn_1")
	other, err := New([]byte("another master key, 32 bytes...!"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, _ := other.Issue(Tools, "sesn_1", "turn_1")
	body, sig, _ := strings.Cut(tools, ".")
	// A token whose payload was changed but whose prefix and MAC are kept.
	forged := "rtt_" + strings.Repeat("A", len(body)-4) + "." + sig
	// The model token's payload and MAC under the tools prefix: the kinds'
	// keys differ.
	swapped := "rtt_" + strings.TrimPrefix(mdl, "rmt_")
	// The same MAC with other padding bits in its last character.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tools[len(tools)-1])
	malleable := tools[:len(tools)-1] + string(alphabet[last^1])
	for name, tok := range map[string]string{
		"non-canonical mac":    malleable,
		"model token as tools": mdl, "tools token as model": tools, "another key": foreign,
		"forged payload": forged, "kind swapped": swapped, "empty": "", "no mac": body,
		"long": "rtt_" + strings.Repeat("a", 2000),
	} {
		kind := Tools
		if name == "tools token as model" {
			kind = Model
		}
		if _, err := is.Verify(kind, tok); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestNewNeedsKey(t *testing.T) {
	if _, err := New(nil, 0); err == nil {
		t.Fatal("New(nil): no error")
	}
	if _, _, err := newIssuer(t, 0).Issue("other", "s", "t"); err == nil {
		t.Fatal("Issue of an unknown kind: no error")
	}
}

// FuzzVerify: no input makes Verify panic, and only tokens Issue made
// verify.
func FuzzVerify(f *testing.F) {
	is := newIssuer(f, time.Hour)
	tok, _, _ := is.Issue(Tools, "sesn_1", "turn_1")
	f.Add(tok)
	f.Add("rtt_.")
	f.Add("rtt_e30.AAAA")
	f.Add("rmt_" + tok[4:])
	f.Fuzz(func(t *testing.T, s string) {
		c, err := is.Verify(Tools, s)
		if err == nil && (s != tok || c.SessionID != "sesn_1") {
			t.Fatalf("%q verified: %+v", s, c)
		}
	})
}
