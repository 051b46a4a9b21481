// Package agents holds the rules of an agent's configuration: what a new
// agent, or a change to one, may hold (name, model, tools, MCP servers,
// skills), how the tools as given resolve to the tools the API echoes, and
// how a change merges into an agent's latest version.
//
// It knows neither HTTP nor the database. Its functions take what the
// caller decoded (and, for a change, the agent it read in its
// transaction) and return the agent to store, or an *Error naming the rule
// broken; the API maps its Kind to a status. What it asks of the rest of
// the server (which models are served, which skills exist) it asks through
// [Rules].
package agents

import "fmt"

// Kind is the kind of rule an [Error] reports.
type Kind int

const (
	// Invalid: the configuration breaks a rule of its own (the API
	// answers 400).
	Invalid Kind = iota + 1
	// Conflict: the agent's state refuses the change: it is archived, or
	// at another version than the one the change names (409).
	Conflict
)

// Error is a rule a configuration breaks. Its message names the field
// first ("tools[0].name: ...").
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

func invalid(format string, args ...any) *Error {
	return &Error{Kind: Invalid, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Kind: Conflict, Message: fmt.Sprintf(format, args...)}
}

// checkLen refuses a string of fewer than lo or more than hi characters.
func checkLen(field, v string, lo, hi int) error {
	n := len([]rune(v))
	if n < lo || n > hi {
		if lo > 0 && n == 0 {
			return invalid("%s: required", field)
		}
		return invalid("%s: must be %d to %d characters, got %d", field, lo, hi, n)
	}
	return nil
}
