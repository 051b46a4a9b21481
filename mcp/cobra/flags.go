package cobra

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// A Codec publishes a custom flag type: its JSON Schema and how a JSON
// value becomes the flag's command-line values (one --name=value per
// element of the returned slice).
type Codec struct {
	// Schema is the JSON Schema of the flag's value.
	Schema json.RawMessage
	// Encode turns a value that matched Schema into flag values. An error
	// is reported to the caller as invalid_arguments.
	Encode func(v json.RawMessage) ([]string, error)
}

// errInexpressible marks a value the command line cannot carry.
var errInexpressible = errors.New("value cannot be expressed on the command line")

// flagKind is the binding of one pflag type.
type flagKind struct {
	schema string
	encode func(json.RawMessage) ([]string, error)
}

func intRange(bits int, signed bool) string {
	lo, hi := int64(0), int64(0)
	switch {
	case signed && bits < 64:
		lo, hi = -(1 << (bits - 1)), 1<<(bits-1)-1
	case signed:
		lo, hi = -(1 << 53), 1<<53
	case bits < 64:
		hi = 1<<bits - 1
	default:
		hi = 1 << 53
	}
	return fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, lo, hi)
}

// builtinKinds maps pflag type names to their bindings.
func builtinKinds() map[string]flagKind {
	k := map[string]flagKind{
		"bool":           {`{"type":"boolean"}`, scalar(encBool)},
		"string":         {`{"type":"string"}`, scalar(encString)},
		"float32":        {`{"type":"number"}`, scalar(encFloat(32))},
		"float64":        {`{"type":"number"}`, scalar(encFloat(64))},
		"duration":       {`{"type":"string","description":"a Go duration such as 1m30s"}`, scalar(encDuration)},
		"count":          {`{"type":"integer","minimum":0,"maximum":1000}`, scalar(encInt)},
		"ip":             {`{"type":"string"}`, scalar(encString)},
		"ipMask":         {`{"type":"string"}`, scalar(encString)},
		"ipNet":          {`{"type":"string"}`, scalar(encString)},
		"bytesHex":       {`{"type":"string"}`, scalar(encString)},
		"bytesBase64":    {`{"type":"string"}`, scalar(encString)},
		"stringArray":    {`{"type":"array","items":{"type":"string"}}`, list(encString, false)},
		"stringSlice":    {`{"type":"array","items":{"type":"string"}}`, list(encString, true)},
		"boolSlice":      {`{"type":"array","items":{"type":"boolean"}}`, list(encBool, true)},
		"float32Slice":   {`{"type":"array","items":{"type":"number"}}`, list(encFloat(32), true)},
		"float64Slice":   {`{"type":"array","items":{"type":"number"}}`, list(encFloat(64), true)},
		"durationSlice":  {`{"type":"array","items":{"type":"string"}}`, list(encDuration, true)},
		"stringToString": {`{"type":"object","additionalProperties":{"type":"string"}}`, mapping(`string`)},
		"stringToInt":    {`{"type":"object","additionalProperties":{"type":"integer"}}`, mapping(`int`)},
		"stringToInt64":  {`{"type":"object","additionalProperties":{"type":"integer"}}`, mapping(`int`)},
	}
	for _, b := range []int{8, 16, 32, 64} {
		k[fmt.Sprintf("int%d", b)] = flagKind{intRange(b, true), scalar(encInt)}
		k[fmt.Sprintf("uint%d", b)] = flagKind{intRange(b, false), scalar(encInt)}
	}
	k["int"] = k["int64"]
	k["uint"] = k["uint64"]
	k["intSlice"] = flagKind{`{"type":"array","items":` + intRange(64, true) + `}`, list(encInt, true)}
	k["int32Slice"] = flagKind{`{"type":"array","items":` + intRange(32, true) + `}`, list(encInt, true)}
	k["int64Slice"] = k["intSlice"]
	k["uintSlice"] = flagKind{`{"type":"array","items":` + intRange(64, false) + `}`, list(encInt, true)}
	return k
}

func scalar(enc func(json.RawMessage) (string, error)) func(json.RawMessage) ([]string, error) {
	return func(v json.RawMessage) ([]string, error) {
		s, err := enc(v)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
}

// list encodes an array as one flag value per element. csv marks pflag
// slice types, which split each value on commas and strip quotes: an
// element holding a comma or a quote cannot be expressed.
func list(enc func(json.RawMessage) (string, error), csv bool) func(json.RawMessage) ([]string, error) {
	return func(v json.RawMessage) ([]string, error) {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			s, err := enc(it)
			if err != nil {
				return nil, err
			}
			if csv && strings.ContainsAny(s, ",\"\n") {
				return nil, fmt.Errorf("%w: list element %q holds a comma, quote or newline", errInexpressible, s)
			}
			out = append(out, s)
		}
		return out, nil
	}
}

func mapping(kind string) func(json.RawMessage) ([]string, error) {
	return func(v json.RawMessage) ([]string, error) {
		var m map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(string(v)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		out := make([]string, 0, len(m))
		for key, raw := range m {
			var s string
			var err error
			if kind == "int" {
				s, err = encInt(raw)
			} else {
				s, err = encString(raw)
			}
			if err != nil {
				return nil, err
			}
			if strings.ContainsAny(key, "=,\"\n") || strings.ContainsAny(s, ",\"\n") {
				return nil, fmt.Errorf("%w: map entry %q", errInexpressible, key)
			}
			out = append(out, key+"="+s)
		}
		slices.Sort(out)
		return out, nil
	}
}

func encBool(v json.RawMessage) (string, error) {
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return "", err
	}
	return strconv.FormatBool(b), nil
}

func encString(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
}

// encInt accepts only whole numbers (1.0 is whole; 1.5 is not).
func encInt(v json.RawMessage) (string, error) {
	f, _, err := big.ParseFloat(strings.TrimSpace(string(v)), 10, 256, big.ToNearestEven)
	if err != nil {
		return "", fmt.Errorf("%w: not a number", errInexpressible)
	}
	i, acc := f.Int(nil)
	if acc != big.Exact {
		return "", fmt.Errorf("%w: %s is not a whole number", errInexpressible, v)
	}
	return i.String(), nil
}

func encFloat(bits int) func(json.RawMessage) (string, error) {
	return func(v json.RawMessage) (string, error) {
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return "", err
		}
		if math.IsInf(f, 0) || math.IsNaN(f) || (bits == 32 && math.Abs(f) > math.MaxFloat32) {
			return "", fmt.Errorf("%w: %s is out of range", errInexpressible, v)
		}
		return strconv.FormatFloat(f, 'g', -1, bits), nil
	}
}

func encDuration(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	if _, err := time.ParseDuration(s); err != nil {
		return "", fmt.Errorf("%w: %q is not a duration", errInexpressible, s)
	}
	return s, nil
}

// published reports whether a flag may be offered to callers at all: not
// help, hidden, deprecated or marked with OmitAnnotation.
func published(f *pflag.Flag) bool {
	return f.Name != "help" && !f.Hidden && f.Deprecated == "" && !slices.Contains(f.Annotations[OmitAnnotation], "true")
}
