// Package ids makes the opaque, prefixed identifiers of API objects
// (agent_…, env_…, sesn_…, sevt_…, req_…).
package ids

import (
	"crypto/rand"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghijkmnopqrstuvwxyz"

// New returns prefix followed by 24 random characters (about 140 bits).
func New(prefix string) string {
	var b [24]byte
	rand.Read(b[:]) // never fails (crypto/rand panics on a broken system)
	out := make([]byte, len(prefix)+len(b))
	copy(out, prefix)
	for i, c := range b {
		out[len(prefix)+i] = alphabet[int(c)%len(alphabet)]
	}
	return string(out)
}

// Prefixes of the identifiers reins makes.
const (
	Agent       = "agent_"
	Environment = "env_"
	Session     = "sesn_"
	Event       = "sevt_"
	Request     = "req_"
	APIKey      = "key_"
)
