package mcp

import (
	"context"
	"errors"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A PromptMode is the elicitation mode of a [Prompt].
type PromptMode string

// The elicitation modes.
const (
	// FormMode asks the user to fill a small form in the client.
	FormMode PromptMode = "form"
	// URLMode asks the user to visit a URL outside the client.
	URLMode PromptMode = "url"
)

// A Prompt is a question a handler asks the user.
type Prompt struct {
	// Mode is FormMode (the default) or URLMode.
	Mode PromptMode
	// Message explains what is being asked.
	Message string
	// Schema is the flat JSON Schema object of a form; nil asks for a
	// plain confirmation.
	Schema map[string]any
	// URL is the address to visit in URLMode.
	URL string
}

// An Answer is the user's accepted reply to a [Prompt].
type Answer struct {
	// Content holds the submitted form values (nil in URLMode).
	Content map[string]any
}

// answer is a recorded reply.
type answer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// chain is the confirmation state of one call.
type chain struct {
	id      string
	replay  []answer // answers recorded for earlier steps
	next    int      // index of the next prompt
	mrtr    bool     // prompts travel as input-required results
	pending *Prompt  // the prompt that interrupted the handler (mrtr)
	args    string   // digest of the arguments, see argsDigest
	rawArgs []byte
	op      string
	caller  string
	limit   int
	req     *sdk.CallToolRequest
}

// errInputRequired interrupts a handler whose prompt must go back to the
// client as an input-required result. Handlers return it unchanged.
var errInputRequired = errors.New("mcp: input required from the client")

// Ask puts p to the user and returns the accepted answer. It fails with
// [CodeInteractionDeclined] or [CodeInteractionCancelled] when the user
// declines or cancels, [CodeConfirmationRequired] when the caller cannot
// answer prompts in p's mode, and [CodeInteractionLimit] past the chain's
// prompt limit. Handlers must return any error from Ask unchanged: on
// clients using multi round-trip requests the handler is re-run from the
// start when the answer arrives, and Ask then returns the recorded answers
// in order.
func (c *Call) Ask(ctx context.Context, p Prompt) (Answer, error) {
	ch := c.chain
	if ch == nil {
		return Answer{}, NewFailure(CodeInternal, internalMessage, errors.New("Ask outside a call"))
	}
	if p.Mode == "" {
		p.Mode = FormMode
	}
	i := ch.next
	ch.next++
	if i < len(ch.replay) {
		return ch.replay[i].result()
	}
	if i >= ch.limit {
		return Answer{}, NewFailure(CodeInteractionLimit,
			fmt.Sprintf("the operation asked more than %d questions in one chain", ch.limit), nil)
	}
	if !supports(ch.req.ClientCapabilities(), p.Mode) {
		return Answer{}, NewFailure(CodeConfirmationRequired,
			fmt.Sprintf("the operation needs %s input, which this client does not support", p.Mode), nil)
	}
	if ch.mrtr {
		ch.pending = &p
		return Answer{}, errInputRequired
	}
	res, err := ch.req.Session.Elicit(ctx, p.params(""))
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, err
		}
		return Answer{}, NewFailure(CodeConfirmationRequired,
			"the operation needs user input, which cannot be requested on this connection", err)
	}
	a := answer{Action: res.Action, Content: res.Content}
	ch.replay = append(ch.replay, a)
	return a.result()
}

func (a answer) result() (Answer, error) {
	switch a.Action {
	case "accept":
		return Answer{Content: a.Content}, nil
	case "decline":
		return Answer{}, NewFailure(CodeInteractionDeclined, "the user declined", nil)
	default:
		return Answer{}, NewFailure(CodeInteractionCancelled, "the user cancelled", nil)
	}
}

func (p Prompt) params(id string) *sdk.ElicitParams {
	if p.Mode == URLMode {
		return &sdk.ElicitParams{Mode: "url", Message: p.Message, URL: p.URL, ElicitationID: id}
	}
	schema := p.Schema
	if schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return &sdk.ElicitParams{Mode: "form", Message: p.Message, RequestedSchema: schema}
}

// supports reports whether a client with caps can answer prompts in mode.
func supports(caps *sdk.ClientCapabilities, mode PromptMode) bool {
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	e := caps.Elicitation
	if mode == URLMode {
		return e.URL != nil
	}
	return e.Form != nil || e.URL == nil
}
