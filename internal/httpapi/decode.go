package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/reinsdev/reins/internal/sessions"
	ma "github.com/reinsdev/reins/managedagents"
)

// decode reads r's JSON body into v, answering malformed JSON, wrong types
// and oversized bodies with a precise message. An empty body decodes as {}.
func decode(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		var mbe *http.MaxBytesError
		var ae *apiError
		switch {
		case errors.As(err, &mbe):
			return errf(http.StatusRequestEntityTooLarge, ma.ErrRequestTooLarge, "request body exceeds %d bytes", mbe.Limit)
		case errors.As(err, &ae):
			return ae // the body timeout's 408
		}
		return badRequest("cannot read request body: %v", err)
	}
	return decodeBytes(data, v)
}

// decodePresent is decode that also returns the top-level keys present.
func decodePresent(r *http.Request, v any) (map[string]json.RawMessage, error) {
	data, err := readBody(r)
	if err != nil {
		return nil, decode(&http.Request{Body: io.NopCloser(errReader{err})}, v)
	}
	if err := decodeBytes(data, v); err != nil {
		return nil, err
	}
	raw := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, badRequest("request body: must be a JSON object")
		}
	}
	return raw, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// bodySizeKey is the context key of the length of a request body that the
// body budget admitted (budget.go).
type bodySizeKey struct{}

// readBody reads r's body whole. A body whose length the body budget
// admitted is read into a buffer of that length: io.ReadAll's growth
// would allocate about five times a large body.
func readBody(r *http.Request) ([]byte, error) {
	n, _ := r.Context().Value(bodySizeKey{}).(int64)
	if n <= 0 {
		return io.ReadAll(r.Body)
	}
	buf := make([]byte, n+1) // a byte more, to see the end without growing
	m, err := io.ReadFull(r.Body, buf)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return buf[:m], nil
	case err != nil:
		return nil, err
	}
	rest, err := io.ReadAll(r.Body) // longer than announced
	return append(buf, rest...), err
}

// decodeBytes decodes data into v and refuses the keys v's type does not
// declare. json.Unmarshal decodes data where it is (a Decoder would copy
// it first, and a body may be 32 MiB).
func decodeBytes(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err)
	}
	return checkUnknown(data, v)
}

func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), "after top-level value"):
		return badRequest("request body: unexpected data after the JSON value")
	case errors.As(err, &se) && se.Error() == "unexpected end of JSON input":
		return badRequest("request body is not valid JSON: unexpected end of input")
	case errors.As(err, &se):
		return badRequest("request body is not valid JSON (at byte %d): %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "request body"
		}
		return badRequest("%s: expected %s, got JSON %s", field, jsonTypeName(te.Type.Kind().String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("request body is not valid JSON: unexpected end of input")
	}
	return badRequest("invalid request body: %v", err)
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	}
	return kind
}

// optString distinguishes an absent field, null and a string.
type optString struct {
	Set   bool
	Null  bool
	Value string
}

func (o *optString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	return json.Unmarshal(b, &o.Value)
}

// metadataPatch is a metadata update: a null value deletes the key.
type metadataPatch map[string]*string

func applyMetadata(cur ma.Metadata, patch metadataPatch) ma.Metadata {
	return sessions.ApplyMetadata(cur, patch)
}

// validateMetadata checks metadata with the rule sessions keep for every
// resource's metadata.
func validateMetadata(field string, m map[string]string) error {
	return sessionError(sessions.CheckMetadata(field, m))
}

func validateMetadataPatch(field string, cur ma.Metadata, p metadataPatch) error {
	return validateMetadata(field, applyMetadata(cur, p))
}

func checkLen(field, v string, lo, hi int) error {
	n := len([]rune(v))
	if n < lo || n > hi {
		if lo > 0 && n == 0 {
			return badRequest("%s: required", field)
		}
		return badRequest("%s: must be %d to %d characters, got %d", field, lo, hi, n)
	}
	return nil
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// unmarshalerType is json.Unmarshaler: a type that decodes itself is not
// walked by unknownFields (it checks its own fields, or takes any).
var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkUnknown refuses the object keys in data that the type of v does
// not declare, at any depth, naming every one with its path and the
// fields its object accepts. Keys match exactly, as the API documents
// them: encoding/json's case-insensitive match would take "Name" for
// "name".
func checkUnknown(data []byte, v any) error { return checkUnknownAt("", data, v) }

// checkUnknownAt is checkUnknown for the object at path (for the types
// that decode themselves).
func checkUnknownAt(path string, data []byte, v any) error {
	var found []unknownField
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	walkFields(path, data, t, &found)
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b unknownField) int { return strings.Compare(a.path, b.path) })
	parts := make([]string, len(found))
	for i, f := range found {
		accepted := "this endpoint takes no body"
		if len(f.accepted) > 0 {
			accepted = "accepted: " + strings.Join(f.accepted, ", ")
		}
		parts[i] = fmt.Sprintf("%s (%s)", f.path, accepted)
	}
	noun := "unknown field"
	if len(found) > 1 {
		noun = "unknown fields"
	}
	return badRequest("%s: %s", noun, strings.Join(parts, "; "))
}

// rawView is a JSON value as a slice of the document json.Unmarshal
// decodes (which hands UnmarshalJSON slices of its input), not a copy of
// it as json.RawMessage is: request bodies may be 32 MiB, and checking
// them walks their values at every depth. A rawView is valid while that
// document is and must not be written to.
type rawView []byte

// UnmarshalJSON implements json.Unmarshaler.
func (v *rawView) UnmarshalJSON(b []byte) error {
	*v = b
	return nil
}

// unknownField is a key that its object's type does not declare.
type unknownField struct {
	path     string
	accepted []string
}

func walkUnknown(path string, raw []byte, t reflect.Type, found *[]unknownField) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		walkFields(path, raw, t, found)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return // raw JSON or bytes
		}
		var items []rawView
		if json.Unmarshal(raw, &items) != nil {
			return
		}
		for i, it := range items {
			walkUnknown(fmt.Sprintf("%s[%d]", path, i), it, t.Elem(), found)
		}
	case reflect.Map:
		var m map[string]rawView
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for k, v := range m {
			walkUnknown(join(path, k), v, t.Elem(), found)
		}
	}
}

// walkFields checks the keys of the object raw against struct type t.
func walkFields(path string, raw []byte, t reflect.Type, found *[]unknownField) {
	if t.Kind() != reflect.Struct {
		walkUnknown(path, raw, t, found)
		return
	}
	var m map[string]rawView
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	fields := jsonFields(t)
	for k, v := range m {
		ft, ok := fields[k]
		if !ok {
			*found = append(*found, unknownField{path: join(path, k), accepted: slices.Sorted(maps.Keys(fields))})
			continue
		}
		walkUnknown(join(path, k), v, ft, found)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields returns the JSON names of t's fields and their types, with
// the fields of embedded structs promoted, as encoding/json reads them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
