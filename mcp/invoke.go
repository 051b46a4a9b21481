package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// invoke runs the named operation for req and turns every outcome into a
// tool result. It returns an error only for protocol-level problems, which
// the SDK sends as JSON-RPC errors.
func (s *Server) invoke(ctx context.Context, req *sdk.CallToolRequest, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	caller := s.caller(ctx, req.Extra)
	ctx, end, ok := s.begin(ctx)
	if !ok {
		return s.failed(name, caller, NewFailure(CodeUnavailable, "the server is shutting down", nil)), nil
	}
	defer end()
	e, ok := s.visible(ctx, caller, name)
	if !ok {
		return s.failed(name, caller, unavailable(name, nil)), nil
	}
	args, value, err := checkArguments(args, s.opts.Arguments)
	if err != nil {
		return s.failed(name, caller, asFailure(err)), nil
	}
	if msg, ok := validateValue(e.input, value); !ok {
		return s.failed(name, caller, invalidArgs("arguments do not match the input schema "+msg)), nil
	}
	ch, release, err := s.resume(req, name, caller, args)
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return s.failed(name, caller, f), nil
		}
		return nil, err // an invalid continuation pair: protocol error
	}
	defer release()

	timeout := e.op.Timeout
	if timeout <= 0 {
		timeout = s.opts.Timeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := &Call{Operation: name, Caller: caller, Arguments: args, Request: req, chain: ch}
	res, err := s.run(cctx, e, call)
	if ch.pending != nil {
		if !errors.Is(err, errInputRequired) {
			return s.failed(name, caller, NewFailure(CodeInvalidResult,
				"the operation ignored the answer it asked for", fmt.Errorf("handler returned %v", err))), nil
		}
		r, ferr := s.inputRequired(ch)
		if ferr != nil {
			return s.failed(name, caller, ferr), nil
		}
		return r, nil
	}
	s.tokens.finish(ch.id)
	if err != nil {
		return s.failed(name, caller, s.classify(ctx, cctx, err)), nil
	}
	out, f := s.succeed(e, res)
	if f != nil {
		return s.failed(name, caller, f), nil
	}
	return out, nil
}

// run calls the handler, turning a panic into an error.
func (s *Server) run(ctx context.Context, e *entry, call *Call) (res *Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return e.op.Handler(ctx, call)
}

// classify maps a handler error to a failure, using the state of the
// call's contexts: outer (the caller's) and inner (with the timeout).
func (s *Server) classify(outer, inner context.Context, err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	switch {
	case errors.Is(context.Cause(outer), errShutdown):
		return NewFailure(CodeCancelled, "the server shut down while the operation ran", err)
	case outer.Err() != nil && errors.Is(outer.Err(), context.DeadlineExceeded):
		return NewFailure(CodeTimeout, "the caller's deadline passed", err)
	case outer.Err() != nil:
		return NewFailure(CodeCancelled, "the caller cancelled the operation", err)
	case inner.Err() != nil:
		return NewFailure(CodeTimeout, "the operation timed out", err)
	}
	return asFailure(err)
}

// succeed checks a handler's result and renders it.
func (s *Server) succeed(e *entry, res *Result) (*sdk.CallToolResult, *Failure) {
	if res == nil {
		return nil, NewFailure(CodeInvalidResult, "the operation returned no outcome", nil)
	}
	if !res.made {
		return nil, NewFailure(CodeInvalidResult, "the operation returned an unconstructed result", nil)
	}
	out := &sdk.CallToolResult{Content: res.content}
	view := res.view
	if view == "" {
		view = e.op.View
	}
	if view != "" {
		if _, ok := s.views[view]; !ok {
			return nil, NewFailure(CodeInvalidResult, "the operation named a view that is not approved",
				fmt.Errorf("view %q", view))
		}
		out.Meta = sdk.Meta{"ui": map[string]any{"resourceUri": view}}
	}
	size := 0
	if res.structured != nil {
		raw, err := json.Marshal(res.structured)
		if err != nil {
			return nil, NewFailure(CodeInvalidResult, "the operation's structured output is not JSON", err)
		}
		if e.output != nil {
			if msg, ok := validate(e.output, raw); !ok {
				return nil, NewFailure(CodeInvalidResult, "the operation's output does not match its output schema",
					errors.New(msg))
			}
		}
		size += 2 * len(raw)
		if err := s.checkSize(size); err != nil {
			return nil, err
		}
		out.StructuredContent = json.RawMessage(raw)
		if out.Content == nil {
			out.Content = []sdk.Content{&sdk.TextContent{Text: string(raw)}}
		}
	}
	for _, c := range out.Content {
		raw, err := json.Marshal(c)
		if err != nil {
			return nil, NewFailure(CodeInvalidResult, "the operation's content cannot be serialised", err)
		}
		if res.structured == nil {
			size += len(raw)
		}
	}
	if err := s.checkSize(size); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSize applies the result budget and the wire ceiling.
func (s *Server) checkSize(n int) *Failure {
	switch {
	case n > WireCeiling:
		return NewFailure(CodeResultTooLarge, fmt.Sprintf("the result exceeds the %d-byte wire ceiling", WireCeiling), nil)
	case s.opts.ResultBudget > 0 && n > s.opts.ResultBudget:
		return NewFailure(CodeResultTooLarge, fmt.Sprintf("the result exceeds the result budget of %d bytes", s.opts.ResultBudget), nil)
	}
	return nil
}

// failed logs f with its private cause and renders it.
func (s *Server) failed(op, caller string, f *Failure) *sdk.CallToolResult {
	s.log.Info("mcp: operation failed", "operation", op, "caller", caller,
		"code", string(f.code), "cause", f.cause)
	return failureResult(f)
}

// failureResult renders f as an error tool result: the envelope as
// structured content, mirrored as a JSON text block.
func failureResult(f *Failure) *sdk.CallToolResult {
	env := f.envelope()
	raw, _ := json.Marshal(env)
	return &sdk.CallToolResult{
		IsError:           true,
		StructuredContent: json.RawMessage(raw),
		Content:           []sdk.Content{&sdk.TextContent{Text: string(raw)}},
	}
}
