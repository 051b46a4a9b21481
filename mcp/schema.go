package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// emptyObjectSchema is the input schema of an operation that declares none.
var emptyObjectSchema = json.RawMessage(`{"type":"object"}`)

// noRemote refuses to load any schema from outside the definition.
type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema references %q, and remote references are not allowed", url)
}

// compileSchema compiles a JSON Schema (2020-12 by default).
func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema of %s is not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemote{})
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", name, err)
	}
	return s, nil
}

var printer = message.NewPrinter(language.English)

// validate checks raw against s and returns a precise, caller-safe
// description of the first violation.
func validate(s *jsonschema.Schema, raw json.RawMessage) (string, bool) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "value is not valid JSON", false
	}
	return validateValue(s, v)
}

// validateValue checks a decoded value (numbers as json.Number).
func validateValue(s *jsonschema.Schema, v any) (string, bool) {
	err := s.Validate(v)
	if err == nil {
		return "", true
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "value does not match the schema", false
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	loc := "/" + strings.Join(leaf.InstanceLocation, "/")
	msg := fmt.Sprintf("at %s: %s", loc, leaf.ErrorKind.LocalizedString(printer))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	return msg, false
}
