// Package secret makes and hashes the long-lived bearer secrets reins
// issues (API keys, environment keys, machine tokens, sessions tokens) and
// stores only by hash.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// Prefixes of the long-lived credentials an executor presents at the token
// endpoint.
const (
	EnvironmentKeyPrefix = "reins_ek_"
	MachineTokenPrefix   = "reins_mt_"
)

// SessionsTokenPrefix starts the sessions tokens the work queue hands to
// pull workers in a work item's secret: the credential of one session's
// work (see store.SessionTokens).
const SessionsTokenPrefix = "reins_st_"

// Hash returns the form in which a secret is stored and looked up: hex
// SHA-256. The secrets reins makes carry at least 128 random bits, so a
// fast hash is enough: there is nothing to brute-force.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// New returns a new random secret, prefix and 256 random bits in base64url,
// to be shown once, and the hash to store in its place.
func New(prefix string) (secret, hash string) {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand aborts on a broken system)
	s := prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return s, Hash(s)
}
