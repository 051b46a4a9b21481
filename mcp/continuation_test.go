package mcp_test

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

// firstStep calls op and expects an input-required result, returning its
// continuation token and input request id.
func firstStep(t *testing.T, s *session, compact bool, op string, args map[string]any) (string, string) {
	t.Helper()
	res := s.call(compact, op, args)
	if !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("%s: want input required, got %s", op, dump(res))
	}
	for id := range res.InputRequests {
		return res.RequestState, id
	}
	panic("unreachable")
}

// answer retries op with a continuation pair.
func answer(s *session, compact bool, op string, args map[string]any, tok, id, action string) (*sdk.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := &sdk.CallToolParams{Name: op, Arguments: args, RequestState: tok}
	if compact {
		p = &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": op, "arguments": args}, RequestState: tok}
	}
	if id != "" {
		p.InputResponses = sdk.InputResponseMap{id: &sdk.ElicitResult{Action: action, Content: map[string]any{"reason": action}}}
	}
	return s.CallTool(ctx, p)
}

// TestContinuations drives confirmation chains by hand over stateless HTTP
// with multi round-trip requests: a chain across prompts, replays,
// forgeries, tokens for other operations and callers, and the protocol
// errors of invalid continuation pairs.
func TestContinuations(t *testing.T) {
	for _, compact := range []bool{true, false} {
		t.Run(map[bool]string{true: "compact", false: "direct"}[compact], func(t *testing.T) {
			opts := fixtureOptions()
			opts.Logger = quietLogger()
			if !compact {
				opts.Mode = mcp.Direct
			}
			url := httpServer(t, newFixture(opts, nil), false)
			s, ht := httpSession(t, url, clientConfig{noMRTR: true, caps: &sdk.ClientCapabilities{
				Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}}})
			args := map[string]any{"target": "db"}

			// A chain across one prompt.
			tok, id := firstStep(t, s, compact, "confirm", args)
			res, err := answer(s, compact, "confirm", args, tok, id, "accept")
			if err != nil {
				t.Fatal(err)
			}
			if got := structuredOf(t, res); got["deleted"] != true {
				t.Fatalf("confirm: %v", got)
			}
			// An identical replay is accepted; a conflicting one is not.
			res, _ = answer(s, compact, "confirm", args, tok, id, "accept")
			structuredOf(t, res)
			res, _ = answer(s, compact, "confirm", args, tok, id, "decline")
			wantFailure(t, res, mcp.CodeContinuationInvalid)
			// Declined through a continuation.
			tok2, id2 := firstStep(t, s, compact, "confirm", args)
			res, _ = answer(s, compact, "confirm", args, tok2, id2, "decline")
			wantFailure(t, res, mcp.CodeInteractionDeclined)
			// A chain across several prompts keeps its count.
			n := map[string]any{"n": 3}
			tok3, id3 := firstStep(t, s, compact, "ask_many", n)
			for i := 0; i < 3; i++ {
				res, err := answer(s, compact, "ask_many", n, tok3, id3, "accept")
				if err != nil {
					t.Fatal(err)
				}
				if i < 2 {
					if !res.NeedsInput() {
						t.Fatalf("step %d: %s", i, dump(res))
					}
					tok3 = res.RequestState
					for k := range res.InputRequests {
						id3 = k
					}
					continue
				}
				if got := structuredOf(t, res); got["asked"] != 3.0 {
					t.Fatalf("ask_many: %v", got)
				}
			}
			// Eleven prompts in one chain.
			n = map[string]any{"n": 11}
			tok4, id4 := firstStep(t, s, compact, "ask_many", n)
			for i := 1; ; i++ {
				res, err := answer(s, compact, "ask_many", n, tok4, id4, "accept")
				if err != nil {
					t.Fatal(err)
				}
				if !res.NeedsInput() {
					wantFailure(t, res, mcp.CodeInteractionLimit)
					if i != 10 {
						t.Fatalf("limit after %d answers", i)
					}
					break
				}
				tok4 = res.RequestState
				for k := range res.InputRequests {
					id4 = k
				}
			}
			// A handler that swallows its prompt has no valid outcome.
			wantFailure(t, s.call(compact, "ignore_prompt", map[string]any{}), mcp.CodeInvalidResult)
			// Malformed and forged tokens.
			for _, bad := range []string{"garbage", "a.b", forge(t, tok)} {
				res, _ = answer(s, compact, "confirm", args, bad, "reins-step-0", "accept")
				wantFailure(t, res, mcp.CodeContinuationInvalid)
			}
			// Another operation, other arguments, another caller.
			res, _ = answer(s, compact, "visit", map[string]any{}, tok, id, "accept")
			wantFailure(t, res, mcp.CodeContinuationInvalid)
			res, _ = answer(s, compact, "confirm", map[string]any{"target": "other"}, tok, id, "accept")
			wantFailure(t, res, mcp.CodeContinuationInvalid)
			ht.set("mallory")
			res, _ = answer(s, compact, "confirm", args, tok, id, "accept")
			wantFailure(t, res, mcp.CodeContinuationInvalid)
			ht.set("")
			// Invalid continuation pairs are protocol errors.
			if _, err := answer(s, compact, "confirm", args, tok, "", ""); err == nil {
				t.Error("requestState without inputResponses: no JSON-RPC error")
			}
			if _, err := answer(s, compact, "confirm", args, tok, "wrong-id", "accept"); err == nil {
				t.Error("inputResponses for another request: no JSON-RPC error")
			}
			ctx := context.Background()
			p := &sdk.CallToolParams{Name: "confirm", Arguments: args,
				InputResponses: sdk.InputResponseMap{id: &sdk.ElicitResult{Action: "accept"}}}
			if compact {
				p.Name, p.Arguments = "call_tool", map[string]any{"name": "confirm", "arguments": args}
			}
			if _, err := s.CallTool(ctx, p); err == nil {
				t.Error("inputResponses without requestState: no JSON-RPC error")
			}
		})
	}
}

// forge flips a bit of the token's payload, keeping its signature.
func forge(t *testing.T, tok string) string {
	p, m, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), `"s":0`, `"s":1`, 1)
	return base64.RawURLEncoding.EncodeToString([]byte(s)) + "." + m
}

// TestContinuationBusy: a second answer while the chain's transition is in
// progress, and a full ledger, both answer busy.
func TestContinuationBusy(t *testing.T) {
	opts := fixtureOptions()
	opts.Logger = quietLogger()
	opts.Mode = mcp.Direct
	opts.LedgerCapacity = 1
	h := &hooks{started: make(chan string), release: make(chan struct{})}
	url := httpServer(t, newFixture(opts, h), false)
	s, _ := httpSession(t, url, clientConfig{noMRTR: true, caller: "blocker", elicit: accept(nil)})
	args := map[string]any{"target": "db"}
	tok, id := firstStep(t, s, false, "confirm", args)

	// The ledger holds one chain: a second chain cannot open.
	wantFailure(t, s.call(false, "ask_many", map[string]any{"n": 1}), mcp.CodeBusy)

	var wg sync.WaitGroup
	var first *sdk.CallToolResult
	wg.Go(func() {
		first, _ = answer(s, false, "confirm", args, tok, id, "accept")
	})
	<-h.started // the first answer is inside the handler
	res, err := answer(s, false, "confirm", args, tok, id, "accept")
	if err != nil {
		t.Fatal(err)
	}
	wantFailure(t, res, mcp.CodeBusy)
	close(h.release)
	wg.Wait()
	structuredOf(t, first)
	// The completed chain gives up its room in the full ledger.
	firstStep(t, s, false, "ask_many", map[string]any{"n": 1})
}

// TestRestartMakesTokensStale: a token issued by one server process is
// stale for the next one.
func TestRestartMakesTokensStale(t *testing.T) {
	caps := &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}}
	s := stdioSession(t, clientConfig{mode: "direct", noMRTR: true, caps: caps})
	args := map[string]any{"target": "db"}
	tok, id := firstStep(t, s, false, "confirm", args)
	_ = s.Close()

	s = stdioSession(t, clientConfig{mode: "direct", noMRTR: true, caps: caps})
	res, err := answer(s, false, "confirm", args, tok, id, "accept")
	if err != nil {
		t.Fatal(err)
	}
	wantFailure(t, res, mcp.CodeContinuationStale)
}

// TestStatelessLegacyFailsClosed: a pre-2026 client on stateless HTTP
// cannot receive server-initiated requests, so a prompt fails closed.
func TestStatelessLegacyFailsClosed(t *testing.T) {
	opts := fixtureOptions()
	opts.Logger = quietLogger()
	url := httpServer(t, newFixture(opts, nil), false)
	s, _ := httpSession(t, url, clientConfig{version: "2025-11-25", elicit: accept(nil)})
	wantFailure(t, s.call(true, "confirm", map[string]any{"target": "x"}), mcp.CodeConfirmationRequired)
	structuredOf(t, s.call(true, "echo", map[string]any{"text": "still works"}))
}
