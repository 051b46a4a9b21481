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
// raw and returns the decoded arguments (an empty object for absent ones),
// with numbers as json.Number. Every violation is a Failure with
// CodeInvalidArguments whose message names the limit and the place.
func checkArguments(raw json.RawMessage, lim ArgumentLimits) (json.RawMessage, any, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{}`), map[string]any{}, nil
	}
	if len(raw) > lim.MaxBytes {
		return nil, nil, invalidArgs(fmt.Sprintf("arguments are %d bytes, over the argument budget of %d bytes", len(raw), lim.MaxBytes))
	}
	if trimmed[0] != '{' {
		return nil, nil, invalidArgs("arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, nil, invalidArgs("arguments are not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, invalidArgs("arguments hold trailing data after the object")
	}
	if err := walk(v, "", 1, lim); err != nil {
		return nil, nil, err
	}
	return raw, v, nil
}

// walk checks a decoded value against the limits.
func walk(v any, path string, depth int, lim ArgumentLimits) error {
	switch x := v.(type) {
	case map[string]any:
		if depth > lim.MaxDepth {
			return invalidArgs(fmt.Sprintf("%s nests deeper than the limit of %d levels", where(path), lim.MaxDepth))
		}
		if len(x) > lim.MaxEntries {
			return invalidArgs(fmt.Sprintf("%s has more than %d entries", where(path), lim.MaxEntries))
		}
		for k, e := range x {
			if len(k) > lim.MaxString {
				return invalidArgs(fmt.Sprintf("a key in %s is longer than %d bytes", where(path), lim.MaxString))
			}
			if err := walk(e, joinPath(path, k), depth+1, lim); err != nil {
				return err
			}
		}
	case []any:
		if depth > lim.MaxDepth {
			return invalidArgs(fmt.Sprintf("%s nests deeper than the limit of %d levels", where(path), lim.MaxDepth))
		}
		if len(x) > lim.MaxEntries {
			return invalidArgs(fmt.Sprintf("%s has more than %d entries", where(path), lim.MaxEntries))
		}
		for i, e := range x {
			if err := walk(e, path+"["+strconv.Itoa(i)+"]", depth+1, lim); err != nil {
				return err
			}
		}
	case string:
		if len(x) > lim.MaxString {
			return invalidArgs(fmt.Sprintf("%s is %d bytes, over the string limit of %d bytes", where(path), len(x), lim.MaxString))
		}
	case json.Number:
		return checkNumber(x, path)
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
