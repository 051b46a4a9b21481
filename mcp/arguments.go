package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ArgumentLimits is the argument budget: bounds checked on a call's
// arguments before schema validation. A zero field takes its default.
type ArgumentLimits struct {
	// MaxBytes bounds the serialised arguments. Default 1 MiB.
	MaxBytes int
	// MaxDepth bounds the nesting of objects and arrays. Default 32.
	MaxDepth int
	// MaxEntries bounds the members of one object or array. Default 1024.
	MaxEntries int
	// MaxString bounds the length in bytes of one string. Default 256 KiB.
	MaxString int
}

func (l ArgumentLimits) withDefaults() ArgumentLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 1 << 20
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 32
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 1024
	}
	if l.MaxString <= 0 {
		l.MaxString = 256 << 10
	}
	return l
}

// MaxSafeInteger is the largest integer magnitude the numeric profile
// accepts: 2^53, beyond which JavaScript clients lose precision.
const MaxSafeInteger = 1 << 53

var maxSafe = big.NewFloat(MaxSafeInteger)

// checkArguments enforces the argument budget and the numeric profile on
// raw, and returns the arguments to validate (an empty object for absent
// arguments). Every violation is a Failure with CodeInvalidArguments whose
// message names the limit and the place.
func checkArguments(raw json.RawMessage, lim ArgumentLimits) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(`{}`), nil
	}
	if len(raw) > lim.MaxBytes {
		return nil, invalidArgs(fmt.Sprintf("arguments are %d bytes, over the argument budget of %d bytes", len(raw), lim.MaxBytes))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	w := walker{dec: dec, lim: lim}
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidArgs("arguments are not valid JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, invalidArgs("arguments must be a JSON object")
	}
	if err := w.container('{', "", 1); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidArgs("arguments hold trailing data after the object")
	}
	return raw, nil
}

type walker struct {
	dec *json.Decoder
	lim ArgumentLimits
}

// container walks the members of an object or array whose opening
// delimiter has been read.
func (w *walker) container(open json.Delim, path string, depth int) error {
	if depth > w.lim.MaxDepth {
		return invalidArgs(fmt.Sprintf("%s nests deeper than the limit of %d levels", where(path), w.lim.MaxDepth))
	}
	n := 0
	for w.dec.More() {
		n++
		if n > w.lim.MaxEntries {
			return invalidArgs(fmt.Sprintf("%s has more than %d entries", where(path), w.lim.MaxEntries))
		}
		child := path + "[" + strconv.Itoa(n-1) + "]"
		if open == '{' {
			tok, err := w.dec.Token()
			if err != nil {
				return invalidArgs("arguments are not valid JSON")
			}
			key, _ := tok.(string)
			if len(key) > w.lim.MaxString {
				return invalidArgs(fmt.Sprintf("a key in %s is longer than %d bytes", where(path), w.lim.MaxString))
			}
			child = joinPath(path, key)
		}
		if err := w.value(child, depth); err != nil {
			return err
		}
	}
	if _, err := w.dec.Token(); err != nil { // closing delimiter
		return invalidArgs("arguments are not valid JSON")
	}
	return nil
}

func (w *walker) value(path string, depth int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return invalidArgs("arguments are not valid JSON")
	}
	switch v := tok.(type) {
	case json.Delim:
		return w.container(v, path, depth+1)
	case string:
		if len(v) > w.lim.MaxString {
			return invalidArgs(fmt.Sprintf("%s is %d bytes, over the string limit of %d bytes", where(path), len(v), w.lim.MaxString))
		}
	case json.Number:
		return checkNumber(v, path)
	}
	return nil
}

// checkNumber applies the numeric profile: finite, and within ±2^53.
func checkNumber(n json.Number, path string) error {
	f, _, err := big.ParseFloat(string(n), 10, 256, big.ToNearestEven)
	if err != nil {
		return invalidArgs(fmt.Sprintf("%s is not a number the server can represent", where(path)))
	}
	if g, _ := f.Float64(); f.IsInf() || math.IsInf(g, 0) || math.IsNaN(g) {
		return invalidArgs(fmt.Sprintf("%s is not a finite number", where(path)))
	}
	if new(big.Float).Abs(f).Cmp(maxSafe) > 0 {
		return invalidArgs(fmt.Sprintf("%s is outside the numeric range ±2^53", where(path)))
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func where(path string) string {
	if path == "" {
		return "the arguments object"
	}
	if len(path) > 80 {
		path = path[:80] + "…"
	}
	return "argument " + strconv.Quote(strings.ToValidUTF8(path, "?"))
}

func invalidArgs(msg string) *Failure { return NewFailure(CodeInvalidArguments, msg, nil) }
