// Package memories holds the rules of memory stores that do not need the
// database: what a memory path may be, how large a memory may grow, and
// where a store is mounted in a session. The HTTP API checks writes with
// it; the store keeps the rules that need a transaction (paths unique and
// not overlapping, the count per store, preconditions). Its Pruner
// deletes the versions past their retention, through the store.
package memories

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Limits of memories.
const (
	// MaxContentBytes bounds a memory's content (UTF-8 bytes).
	MaxContentBytes = 100 << 10
	// MaxPathBytes bounds a memory's path.
	MaxPathBytes = 1024
	// MaxSegments bounds the segments of a path.
	MaxSegments = 20
	// MountRoot is where sessions see their memory stores.
	MountRoot = "/mnt/memory"
)

// CheckPath returns why p is not a valid memory path, or nil: it starts
// with "/", has 1 to MaxSegments segments, none empty, "." or "..", no
// control or format characters nor line or paragraph separators, is NFC
// and at most MaxPathBytes bytes.
func CheckPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return errors.New("must start with /")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("must be at most %d bytes, got %d", MaxPathBytes, len(p))
	case !utf8.ValidString(p):
		return errors.New("must be valid UTF-8")
	case !norm.NFC.IsNormalString(p):
		return errors.New("must be in Unicode normalization form C (NFC)")
	}
	for _, r := range p {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("must not contain the character %U", r)
		}
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > MaxSegments {
		return fmt.Errorf("must have at most %d segments, got %d", MaxSegments, len(segs))
	}
	for _, s := range segs {
		switch s {
		case "":
			return errors.New("must not have an empty segment (a doubled or trailing /)")
		case ".", "..":
			return fmt.Errorf("must not have a %q segment", s)
		}
	}
	return nil
}

// CheckPrefix returns why p is not a valid path_prefix of a memory list:
// "/" or a valid path followed by "/".
func CheckPrefix(p string) error {
	if !strings.HasSuffix(p, "/") {
		return errors.New("must end with /")
	}
	if p == "/" {
		return nil
	}
	return CheckPath(strings.TrimSuffix(p, "/"))
}

// CheckContent returns why c is not a valid memory content, or nil.
func CheckContent(c string) error {
	if len(c) > MaxContentBytes {
		return fmt.Errorf("must be at most %d bytes (100 kB), got %d", MaxContentBytes, len(c))
	}
	if !utf8.ValidString(c) {
		return errors.New("must be valid UTF-8")
	}
	return nil
}

// Slug is the directory name of a store named name: lowercased, each run
// of characters other than a-z and 0-9 made one "-", without a leading or
// trailing "-" ("Demo Memory" → "demo-memory"); "memory" when nothing is
// left.
func Slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "memory"
	}
	return b.String()
}
