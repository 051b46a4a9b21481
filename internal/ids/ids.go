// Package ids makes the opaque, prefixed identifiers of API objects
// (agent_…, env_…, sesn_…, sevt_…, req_…).
package ids

import (
	"crypto/rand"
	"io"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghijkmnopqrstuvwxyz"

// idLen is the number of random characters of an id.
const idLen = 24

// unbiased is the largest multiple of len(alphabet) that fits a byte: a
// byte below it maps to every character equally often, the rest are
// dropped.
const unbiased = 256 - 256%len(alphabet)

// New returns prefix followed by 24 characters drawn uniformly from a
// 57-letter alphabet (about 140 bits).
func New(prefix string) string {
	return newFrom(rand.Reader, prefix)
}

// newFrom is New reading random bytes from r.
func newFrom(r io.Reader, prefix string) string {
	out := make([]byte, len(prefix), len(prefix)+idLen)
	copy(out, prefix)
	var buf [idLen + idLen/2]byte // rejection drops about 11% of bytes
	for len(out) < cap(out) {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			// crypto/rand never fails: it aborts the program instead.
			panic("ids: reading random bytes: " + err.Error())
		}
		for _, c := range buf {
			if int(c) < unbiased && len(out) < cap(out) {
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// Prefixes of the identifiers reins makes.
const (
	Agent       = "agent_"
	Environment = "env_"
	Session     = "sesn_"
	// SessionResource starts the ids of a session's file and
	// repository resources.
	SessionResource = "sesrsc_"
	Event           = "sevt_"
	Request         = "req_"
	APIKey          = "key_"
	Workspace       = "wrkspc_"
	AuditEvent      = "audit_"
)
