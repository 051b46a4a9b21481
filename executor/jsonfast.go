package executor

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The frames on a tool call's path (the tool.call request, its
// acknowledgement with the result) are decoded and encoded here without
// reflection: encoding/json takes about 5 µs per frame, more than the
// loopback round trip itself. The fast paths accept only the plain shape
// those frames have; anything else (an escaped key, a duplicate member, a
// null where a string is expected, a key that differs only in case)
// returns false and the caller falls back to encoding/json, so the result
// is always what encoding/json would give. The fuzz tests hold the two to
// that.

// jsonScan is a validating cursor over one JSON text.
type jsonScan struct {
	b []byte
	i int
}

// maxScanDepth bounds nesting on the fast path; deeper values fall back.
const maxScanDepth = 64

func (s *jsonScan) space() {
	b, i := s.b, s.i
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	s.i = i
}

// next skips white space and returns the next byte, or 0 at the end.
func (s *jsonScan) next() byte {
	s.space()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// atEnd reports whether only white space is left.
func (s *jsonScan) atEnd() bool { return s.next() == 0 && s.i == len(s.b) }

func (s *jsonScan) literal(w string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		return false
	}
	s.i += len(w)
	return true
}

// value validates and skips one value.
func (s *jsonScan) value(depth int) bool {
	switch c := s.next(); {
	case c == '{':
		if depth >= maxScanDepth {
			return false
		}
		return s.object(func(key []byte) bool { return s.value(depth + 1) })
	case c == '[':
		if depth >= maxScanDepth {
			return false
		}
		return s.array(func() bool { return s.value(depth + 1) })
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

// raw validates one value and returns its bytes.
func (s *jsonScan) raw() ([]byte, bool) {
	s.space()
	start := s.i
	if !s.value(0) {
		return nil, false
	}
	return s.b[start:s.i], true
}

// object reads an object, calling member with each key (which has no
// escapes; an escaped key gives up) with the cursor on the value; member
// must consume the value.
func (s *jsonScan) object(member func(key []byte) bool) bool {
	if s.next() != '{' {
		return false
	}
	s.i++
	if s.next() == '}' {
		s.i++
		return true
	}
	for {
		if s.next() != '"' {
			return false
		}
		key, esc, ok := s.str()
		if !ok || esc {
			return false
		}
		if s.next() != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(key) {
			return false
		}
		switch s.next() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with the cursor on each element.
func (s *jsonScan) array(elem func() bool) bool {
	if s.next() != '[' {
		return false
	}
	s.i++
	if s.next() == ']' {
		s.i++
		return true
	}
	for {
		s.space()
		if !elem() {
			return false
		}
		switch s.next() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string and returns its content between the quotes and
// whether it holds escapes.
func (s *jsonScan) str() (content []byte, escaped, ok bool) {
	b := s.b
	if s.i >= len(b) || b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for j := start; j < len(b); j++ {
		c := b[j]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		switch {
		case c == '"':
			s.i = j + 1
			return b[start:j], escaped, true
		case c == '\\':
			escaped = true
			j++
			if j >= len(b) {
				return nil, false, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex4(b[j+1:j+5]) {
					return nil, false, false
				}
				j += 4
			default:
				return nil, false, false
			}
		default: // a control character
			return nil, false, false
		}
	}
	return nil, false, false
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func (s *jsonScan) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// number validates a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

// text reads a string value as encoding/json would decode it; false for
// anything but a string, and for strings whose decoding the fast path
// leaves to encoding/json (invalid UTF-8, surrogate escapes).
func (s *jsonScan) text() (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	content, esc, ok := s.str()
	if !ok {
		return "", false
	}
	if !esc {
		if !utf8.Valid(content) {
			return "", false
		}
		return string(content), true
	}
	return unescape(content)
}

// word reads a string value like text, returning the one of known it
// equals without allocating a copy.
func (s *jsonScan) word(known []string) (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	start := s.i
	content, esc, ok := s.str()
	if ok && !esc {
		for _, k := range known {
			if string(content) == k {
				return k, true
			}
		}
	}
	s.i = start
	return s.text()
}

func unescape(content []byte) (string, bool) {
	out := make([]byte, 0, len(content))
	for i := 0; i < len(content); i++ {
		c := content[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch content[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := strconv.ParseUint(string(content[i+1:i+5]), 16, 32)
			if utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			out = utf8.AppendRune(out, rune(r))
			i += 4
		default: // '"', '\\', '/'
			out = append(out, content[i])
		}
	}
	if !utf8.Valid(out) {
		return "", false
	}
	return string(out), true
}

// boolean reads true or false.
func (s *jsonScan) boolean() (bool, bool) {
	switch s.next() {
	case 't':
		return true, s.literal("true")
	case 'f':
		return false, s.literal("false")
	}
	return false, false
}

// integer reads a number without fraction or exponent that fits an int64.
func (s *jsonScan) integer() (int64, bool) {
	s.space()
	start := s.i
	if !s.number() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return n, err == nil
}

// readObject reads an object whose members named keys are read by read
// (called with the key's index, the cursor on the value); the rest are
// skipped. It gives up on a key seen twice and on an unknown key that
// encoding/json would match to a known one (it matches case-insensitively).
func (s *jsonScan) readObject(keys []string, read func(k int) bool) bool {
	var seen uint64
	return s.object(func(key []byte) bool {
		for k, want := range keys {
			if string(key) == want {
				if seen&(1<<k) != 0 {
					return false
				}
				seen |= 1 << k
				return read(k)
			}
		}
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return false
			}
		}
		for _, want := range keys {
			if strings.EqualFold(string(key), want) {
				return false
			}
		}
		return s.value(1)
	})
}

// appendString appends s as a JSON string; false if s is not valid UTF-8
// (encoding/json would replace the bad bytes: let it).
func appendString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

const hexDigit = "0123456789abcdef"

// appendRaw appends a JSON value given as bytes after checking it is one
// valid value (null for none).
func appendRaw(b, raw []byte) ([]byte, bool) {
	if len(raw) == 0 {
		return append(b, "null"...), true
	}
	s := jsonScan{b: raw}
	if !s.value(0) || !s.atEnd() {
		return b, false
	}
	return append(b, raw...), true
}
