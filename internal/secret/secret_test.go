package secret

import (
	"strings"
	"testing"
)

func TestHash(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2 test vector): stored hashes must not
	// change, or every stored key stops working.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Hash("abc"); got != want {
		t.Fatalf("Hash(abc) = %s, want %s", got, want)
	}
}

func TestNew(t *testing.T) {
	s, h := New(EnvironmentKeyPrefix)
	if !strings.HasPrefix(s, EnvironmentKeyPrefix) || len(s) != len(EnvironmentKeyPrefix)+43 {
		t.Fatalf("New = %q, want the prefix and 43 base64url characters", s)
	}
	if h != Hash(s) {
		t.Fatalf("hash %s is not Hash(secret)", h)
	}
	if s2, _ := New(EnvironmentKeyPrefix); s2 == s {
		t.Fatal("two secrets are equal")
	}
}
