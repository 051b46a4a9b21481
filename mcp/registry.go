package mcp

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// entry is a compiled operation.
type entry struct {
	op     Operation
	input  *jsonschema.Schema
	output *jsonschema.Schema
	inRaw  json.RawMessage
}

// registry is the server's operation catalogue.
type registry struct {
	mu      sync.RWMutex // guards entries
	entries map[string]*entry
}

func newRegistry() *registry { return &registry{entries: map[string]*entry{}} }

// add compiles op and adds it. A definition that cannot be compiled is a
// Failure with CodeInvalidResult.
func (r *registry) add(op Operation, views map[string]View) (*entry, error) {
	bad := func(format string, args ...any) error {
		return NewFailure(CodeInvalidResult, "the operation definition could not be compiled",
			fmt.Errorf("operation %q: "+format, append([]any{op.Name}, args...)...))
	}
	if !validName.MatchString(op.Name) {
		return nil, bad("name must match %s", validName)
	}
	if op.Handler == nil {
		return nil, bad("no handler")
	}
	if _, ok := views[op.View]; op.View != "" && !ok {
		return nil, bad("view %q is not approved", op.View)
	}
	in := op.InputSchema
	if len(in) == 0 {
		in = emptyObjectSchema
	}
	var top struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(in, &top); err != nil || top.Type != "object" {
		return nil, bad(`input schema must be a JSON object with "type":"object"`)
	}
	e := &entry{op: op, inRaw: in}
	var err error
	if e.input, err = compileSchema(op.Name+".input", in); err != nil {
		return nil, bad("%w", err)
	}
	if len(op.OutputSchema) > 0 {
		if e.output, err = compileSchema(op.Name+".output", op.OutputSchema); err != nil {
			return nil, bad("%w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[op.Name]; dup {
		return nil, bad("duplicate name")
	}
	r.entries[op.Name] = e
	return e, nil
}

func (r *registry) get(name string) (*entry, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.entries[name]
	return e, ok
}

// sorted returns the entries ordered by name.
func (r *registry) sorted() []*entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*entry, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int { return strings.Compare(a.op.Name, b.op.Name) })
	return out
}
