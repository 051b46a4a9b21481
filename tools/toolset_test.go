package tools_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/reinsdev/reins/tools"
	"github.com/reinsdev/reins/tools/toolset"
)

// TestToolsetSchemasMatchInputs checks that the schema the model is offered
// for each built-in tool names exactly the fields DecodeInput accepts.
func TestToolsetSchemasMatchInputs(t *testing.T) {
	for _, b := range toolset.Builtins() {
		var schema struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(b.InputSchema, &schema); err != nil {
			t.Fatalf("%s: schema: %v", b.Name, err)
		}
		input := map[string]any{}
		for name, p := range schema.Properties {
			input[name] = sampleValue(name, p.Type)
		}
		raw, _ := json.Marshal(input)
		in, err := tools.DecodeInput(b.Name, raw)
		if err != nil {
			t.Fatalf("%s: DecodeInput(%s): %v", b.Name, raw, err)
		}
		fields := jsonFields(reflect.TypeOf(in).Elem())
		if got := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(got, fields) {
			t.Errorf("%s: schema properties %v, input fields %v", b.Name, got, fields)
		}
		for _, r := range schema.Required {
			if !slices.Contains(fields, r) {
				t.Errorf("%s: required %q is not an input field", b.Name, r)
			}
		}
	}
}

func sampleValue(name, typ string) any {
	switch typ {
	case "boolean":
		return false
	case "integer":
		return 1
	case "array":
		return []int{1, 2}
	}
	return name // distinct strings, so edit's old and new differ
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
