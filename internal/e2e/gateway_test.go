package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	oaoption "github.com/openai/openai-go/v3/option"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/fakeopenai"
	"github.com/reinsdev/reins/internal/model"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
	oaprovider "github.com/reinsdev/reins/internal/model/openai"
	ma "github.com/reinsdev/reins/managedagents"
)

// gatewayServer runs reins with its anthropic and openai providers pointed
// at fake APIs on loopback; adjust may tune the app's configuration.
func gatewayServer(t *testing.T, adjust func(*app.Config)) (*server, *fakeanthropic.Server, *fakeopenai.Server) {
	t.Helper()
	fa, fo := fakeanthropic.New(t), fakeopenai.New(t)
	models := model.Router{
		"anthropic": provider.New(provider.Options{APIKey: "upstream-key", BaseURL: fa.URL, HTTPClient: fa.Client()}),
		"openai":    oaprovider.New(oaprovider.Options{APIKey: "upstream-openai-key", BaseURL: fo.URL + "/v1", HTTPClient: fo.Client()}),
	}
	return startWith(t, options{models: models}, adjust), fa, fo
}

// gatewayTurn runs one turn of a new agent-end session whose agent uses
// modelID: check runs on the agent end during the turn (which it ends),
// and its error fails the test. It returns the session id and the turn's
// events as the SDK streamed them.
func gatewayTurn(t *testing.T, s *server, modelID string, check func(ctx context.Context, tr *executor.Turn) error) (string, []frame) {
	t.Helper()
	sessID, token := agentEndSessionWith(t, s, s.newAgent(t, modelID))
	results := make(chan error, 1)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		results <- check(ctx, tr)
		// Ended even after a failed check, so that the test reports it
		// at the idle rather than after the stream's timeout.
		return tr.EndTurn(ctx)
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hi"))
	evs := st.until(isIdle)
	if err := within(t, results, "the agent end's checks"); err != nil {
		t.Fatal(err)
	}
	return sessID, evs
}

// anthropicClient is the official SDK on a model grant.
func anthropicClient(g *executor.TokenGrant) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(g.BaseURL), option.WithAPIKey(g.Token), option.WithMaxRetries(0))
}

func hello(g *executor.TokenGrant) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(g.Model), MaxTokens: 100, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
}

// apiStatus returns the HTTP status of an SDK error, 0 if none.
func apiStatus(err error) int {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode
	}
	return 0
}

// spanEnds returns the session's span.model_request_end events.
func spanEnds(t *testing.T, s *server, sessID string) []ma.Event {
	t.Helper()
	_, evs := agentMessages(t, s, sessID)
	return slices.DeleteFunc(evs, func(ev ma.Event) bool { return ev.Type != ma.EventSpanModelRequestEnd })
}

func sessionUsage(t *testing.T, s *server, sessID string) ma.SessionUsage {
	t.Helper()
	var sess ma.Session
	if _, err := call(s.url, s.key, "GET", "/v1/sessions/"+sessID, nil, &sess); err != nil {
		t.Fatal(err)
	}
	return sess.Usage
}

// TestGatewayAnthropic: an agent end calls the session's Claude model
// through the gateway with the official SDK: another model is a 400 that
// never reaches the provider; a 529 of the provider is retried by reins
// (a retrying session.error) and the SDK gets the answer; a stream passes
// through event by event; each call is a span with the usage the provider
// reported, counted in the session's usage; the provider sees reins's key,
// never the model token.
func TestGatewayAnthropic(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	fake.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded"))
	fake.Push(fakeanthropic.Text("hello there").WithUsage(fakeanthropic.Usage{InputTokens: 11, OutputTokens: 7, CacheReadInputTokens: 3}))
	fake.Push(fakeanthropic.Text("one two three four five six").WithUsage(fakeanthropic.Usage{InputTokens: 5, OutputTokens: 4}).WithDelay(40 * time.Millisecond))
	var grant executor.TokenGrant
	sessID, evs := gatewayTurn(t, s, provider.DefaultModel, func(ctx context.Context, tr *executor.Turn) error {
		g := tr.Start.Model
		if g == nil || g.Provider != "anthropic" || g.Model != provider.DefaultModel || !strings.HasSuffix(g.BaseURL, "/v1/gateway/anthropic") || g.Token == "" {
			return fmt.Errorf("model grant %+v", g)
		}
		grant = *g
		client := anthropicClient(g)
		wrong := hello(g)
		wrong.Model = "claude-other-model"
		if _, err := client.Messages.New(ctx, wrong); apiStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "serves the session's model") {
			return fmt.Errorf("another model: %v, want 400", err)
		}
		msg, err := client.Messages.New(ctx, hello(g))
		if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "hello there" || msg.Usage.InputTokens != 11 || msg.Usage.OutputTokens != 7 {
			return fmt.Errorf("message %+v: %v", msg, err)
		}
		stream := client.Messages.NewStreaming(ctx, hello(g))
		var text string
		var first, last time.Time
		n := 0
		for stream.Next() {
			if n++; n == 1 {
				first = time.Now()
			}
			last = time.Now()
			if ev := stream.Current(); ev.Type == "content_block_delta" {
				text += ev.Delta.Text
			}
		}
		if err := stream.Err(); err != nil || text != "one two three four five six" {
			return fmt.Errorf("stream %q: %v", text, err)
		}
		// The provider sends an event every 40 ms: the agent end got the
		// first long before the last.
		if last.Sub(first) < 200*time.Millisecond {
			return fmt.Errorf("%d events within %v: the stream was not passed through as it came", n, last.Sub(first))
		}
		return tr.Send(ctx, agentMessage(msg.Content[0].Text))
	})
	if e := errorStatuses(evs); !slices.Equal(e, []string{"model_overloaded_error/retrying"}) {
		t.Fatalf("session errors %v (%v)", e, types(evs))
	}
	ends := spanEnds(t, s, sessID)
	if len(ends) != 3 || !*ends[0].IsError || *ends[1].IsError || *ends[2].IsError {
		t.Fatalf("span ends %+v", ends)
	}
	if u := ends[1].ModelUsage; u.InputTokens != 11 || u.OutputTokens != 7 || u.CacheReadInputTokens != 3 {
		t.Fatalf("usage of the call %+v", u)
	}
	if u := ends[2].ModelUsage; u.InputTokens != 5 || u.OutputTokens != 4 {
		t.Fatalf("usage of the stream %+v", u)
	}
	if u := sessionUsage(t, s, sessID); u.InputTokens != 16 || u.OutputTokens != 11 || u.CacheReadInputTokens != 3 {
		t.Fatalf("session usage %+v", u)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d calls reached the provider, want 3", len(reqs))
	}
	for _, r := range reqs {
		if auth := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"); strings.Contains(auth, grant.Token) || !strings.Contains(auth, "upstream-key") {
			t.Fatalf("the provider got credentials %q", auth)
		}
	}
	if reqs[2].Body["stream"] != true {
		t.Fatalf("the stream was not asked for upstream: %v", reqs[2].Body)
	}
}

// TestGatewayExhausted: a provider that keeps answering 529 exhausts the
// retries: the agent end gets the provider's 529 and error body, the
// session records the retries and then an exhausted session.error and goes
// idle with retries_exhausted; what the agent end sends then is
// turn_inactive.
func TestGatewayExhausted(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	for range 3 {
		fake.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded"))
	}
	_, evs := gatewayTurn(t, s, provider.DefaultModel, func(ctx context.Context, tr *executor.Turn) error {
		client := anthropicClient(tr.Start.Model)
		_, err := client.Messages.New(ctx, hello(tr.Start.Model))
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 529 || ae.Type() != "overloaded_error" {
			return fmt.Errorf("exhausted call: %v, want the provider's 529", err)
		}
		// The turn is over: what the agent end sends is turn_inactive.
		err = tr.Send(ctx, agentMessage("too late"))
		if re := (*executor.RPCError)(nil); !errors.As(err, &re) || re.Reason() != executor.ReasonTurnInactive {
			return fmt.Errorf("after the exhausted call: %v, want turn_inactive", err)
		}
		return nil
	})
	want := []string{"model_overloaded_error/retrying", "model_overloaded_error/retrying", "model_overloaded_error/exhausted"}
	if e := errorStatuses(evs); !slices.Equal(e, want) {
		t.Fatalf("session errors %v, want %v", e, want)
	}
	if last := evs[len(evs)-1]; last.StopReason == nil || last.StopReason.Type != ma.StopRetriesExhausted {
		t.Fatalf("idle %+v", last.StopReason)
	}
}

// TestGatewayModelToken: an expired model token is a 401 in the Messages
// API's error shape; model_token.refresh gives a fresh one that works;
// another agent end refreshing the turn is forbidden; after the turn,
// refreshing is turn_inactive and the token a 401.
func TestGatewayModelToken(t *testing.T) {
	s, fake, _ := gatewayServer(t, func(c *app.Config) { c.TurnTokenTTL = time.Second })
	fake.Push(fakeanthropic.Text("fresh"))
	sessID, token := agentEndSessionWith(t, s, s.newAgent(t, provider.DefaultModel))
	other := executor.NewClient(executor.Options{URL: s.url, MachineToken: token, Executor: executor.ExecutorInfo{Name: "other"}, HTTPClient: ownHTTPClient(t),
		Sessions: &executor.BuiltinSessions{Dir: t.TempDir()}, Capabilities: []string{executor.CapabilityAgent}, Agent: executor.AgentHandlerFunc(func(ctx context.Context, _ *executor.Turn) error { <-ctx.Done(); return nil })})
	results := make(chan error, 1)
	var old *executor.TokenGrant
	var turn *executor.Turn
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		turn, old = tr, tr.Start.Model
		results <- func() error {
			time.Sleep(time.Until(old.ExpiresAt) + 1100*time.Millisecond)
			res, err := rawGatewayCall(ctx, old, `{"model":"`+old.Model+`","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
			if err != nil {
				return err
			}
			if res.status != 401 || res.body.Type != "error" || res.body.Error.Type != "authentication_error" || !strings.Contains(res.body.Error.Message, "expired") {
				return fmt.Errorf("expired token: %d %+v", res.status, res.body)
			}
			fresh, err := tr.RefreshModelToken(ctx)
			if err != nil || fresh.Token == old.Token || fresh.BaseURL != old.BaseURL || !fresh.ExpiresAt.After(time.Now()) {
				return fmt.Errorf("refresh %+v: %v", fresh, err)
			}
			fc := anthropicClient(&fresh)
			msg, err := fc.Messages.New(ctx, hello(&fresh))
			if err != nil || msg.Content[0].Text != "fresh" {
				return fmt.Errorf("with the fresh token: %v", err)
			}
			go other.Run(context.Background())
			t.Cleanup(other.Stop)
			err = executor.ErrNotConnected
			for ; errors.Is(err, executor.ErrNotConnected); time.Sleep(5 * time.Millisecond) {
				err = other.Call(ctx, executor.MethodModelTokenRefresh, map[string]string{"session_id": sessID, "turn_id": tr.Start.TurnID}, nil)
			}
			if re := (*executor.RPCError)(nil); !errors.As(err, &re) || re.Reason() != executor.ReasonForbidden {
				return fmt.Errorf("another agent end's refresh: %v, want forbidden", err)
			}
			*old = fresh
			return nil
		}()
		return tr.EndTurn(ctx)
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hi"))
	st.until(isIdle)
	if err := within(t, results, "the agent end's checks"); err != nil {
		t.Fatal(err)
	}
	_, err := turn.RefreshModelToken(context.Background())
	if re := (*executor.RPCError)(nil); !errors.As(err, &re) || re.Reason() != executor.ReasonTurnInactive {
		t.Fatalf("refresh after the turn: %v, want turn_inactive", err)
	}
	res, err := rawGatewayCall(context.Background(), old, `{"model":"`+old.Model+`"}`)
	if err != nil || res.status != 401 || !strings.Contains(res.body.Error.Message, "turn_inactive") {
		t.Fatalf("a token of an ended turn: %d %+v %v", res.status, res.body, err)
	}
}

type gatewayResult struct {
	status int
	body   struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

// rawGatewayCall posts body to the grant's Messages endpoint with the
// token as x-api-key.
func rawGatewayCall(ctx context.Context, g *executor.TokenGrant, body string) (gatewayResult, error) {
	var r gatewayResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.BaseURL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return r, err
	}
	req.Header.Set("x-api-key", g.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r.status = res.StatusCode
	return r, json.Unmarshal(b, &r.body)
}

// TestGatewayOpenAI: an openai/* model is served at the gateway's Chat
// Completions path to the official openai-go SDK, streamed and not; the
// usage is recorded even when the stream's client did not ask for it
// (reins asks upstream and keeps the usage chunk from the client).
func TestGatewayOpenAI(t *testing.T) {
	s, _, fake := gatewayServer(t, nil)
	fake.Push(fakeopenai.Text("plain answer").WithUsage(fakeopenai.Usage{PromptTokens: 9, CompletionTokens: 2}))
	fake.Push(fakeopenai.Text("streamed answer").WithUsage(fakeopenai.Usage{PromptTokens: 6, CompletionTokens: 3, CachedTokens: 2}))
	sessID, _ := gatewayTurn(t, s, "openai/gpt-test", func(ctx context.Context, tr *executor.Turn) error {
		g := tr.Start.Model
		if g == nil || g.Provider != "openai" || g.Model != "gpt-test" || !strings.HasSuffix(g.BaseURL, "/v1/gateway/openai") {
			return fmt.Errorf("model grant %+v", g)
		}
		client := openai.NewClient(oaoption.WithBaseURL(g.BaseURL), oaoption.WithAPIKey(g.Token), oaoption.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{Model: g.Model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil || c.Choices[0].Message.Content != "plain answer" || c.Usage.PromptTokens != 9 {
			return fmt.Errorf("completion %+v: %v", c, err)
		}
		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var text string
		for stream.Next() {
			ch := stream.Current()
			if ch.Usage.PromptTokens != 0 || len(ch.Choices) == 0 {
				return fmt.Errorf("a usage chunk the client did not ask for: %s", ch.RawJSON())
			}
			text += ch.Choices[0].Delta.Content
		}
		if err := stream.Err(); err != nil || text != "streamed answer" {
			return fmt.Errorf("stream %q: %v", text, err)
		}
		params.Model = "gpt-other"
		if _, err := client.Chat.Completions.New(ctx, params); apiStatus(err) != http.StatusBadRequest {
			return fmt.Errorf("another model: %v, want 400", err)
		}
		return nil
	})
	ends := spanEnds(t, s, sessID)
	if len(ends) != 2 || ends[0].ModelUsage.InputTokens != 9 || ends[0].ModelUsage.OutputTokens != 2 ||
		ends[1].ModelUsage.InputTokens != 4 || ends[1].ModelUsage.CacheReadInputTokens != 2 || ends[1].ModelUsage.OutputTokens != 3 {
		t.Fatalf("span ends %+v", ends)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[1].Body["stream_options"].(map[string]any)["include_usage"] != true {
		t.Fatalf("requests %+v", reqs)
	}
	if auth := reqs[0].Header.Get("Authorization"); auth != "Bearer upstream-openai-key" {
		t.Fatalf("the provider got credentials %q", auth)
	}
}

// TestGatewayExampleLikeBuiltinLoop is the agent end's "done when": the
// official SDK drives a session whose turns the example agent end runs as
// a child process, calling the model (the fake Messages API) through the
// gateway and bash through the platform tools endpoint, on the hands of a
// separate reins executor process. The SDK sees the same events as in the
// same conversation with the built-in loop, run beside it: the same types
// in the same order (the model request spans aside, which the gateway
// closes before the agent end appends what the model said, and the
// built-in loop after: the same number of them), the same tool result.
func TestGatewayExampleLikeBuiltinLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs reins executor and the example agent end")
	}
	reins, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	example, err := buildAgentEndExample()
	if err != nil {
		t.Fatal(err)
	}
	s, fake, _ := gatewayServer(t, nil)
	envID, key := s.selfHosted(t, "hands")
	startExecutor(t, reins, s.url, key, "hands")
	waitExecutors(t, s, envID, 1, 20*time.Second) // else the built-in loop's first tool call waits in rescheduling
	a := s.newAgent(t, provider.DefaultModel, toolset(false))
	conversation := func(sessID string) (events []string, spans int, result string) {
		t.Helper()
		fake.Push(fakeanthropic.Reply(fakeanthropic.ToolUseBlock("toolu_1", "bash", `{"command":"echo from the hands"}`)))
		fake.Push(fakeanthropic.Text("The command printed its words."))
		st := s.openStream(t, sessID)
		s.send(t, sessID, userMessage("run it"))
		for _, f := range st.until(isIdle) {
			switch {
			case strings.HasPrefix(f.Type, "span."):
				spans++
			case f.Type == ma.EventAgentToolResult && len(f.Content) > 0:
				result = f.Content[0].Text
				fallthrough
			default:
				events = append(events, f.Type)
			}
		}
		return events, spans, result
	}
	builtin := s.newSession(t, a.ID, envID)
	wantEvents, wantSpans, wantResult := conversation(builtin.ID)
	if !slices.Contains(wantEvents, ma.EventAgentToolResult) || !strings.Contains(wantResult, "from the hands") {
		t.Fatalf("built-in loop: %v, tool result %q", wantEvents, wantResult)
	}

	sessID, token := agentEndSessionIn(t, s, a, envID)
	startAgentEndExample(t, example, s.url, token, "example-brain", 0)
	events, spans, result := conversation(sessID)
	if !slices.Equal(events, wantEvents) || spans != wantSpans || result != wantResult {
		t.Fatalf("agent end: %v (%d span events), tool result %q\nbuilt-in loop: %v (%d span events), tool result %q",
			events, spans, result, wantEvents, wantSpans, wantResult)
	}
	if texts, _ := agentMessages(t, s, sessID); !slices.Equal(texts, []string{"The command printed its words."}) {
		t.Fatalf("agent messages %q", texts)
	}
	// The fake saw the agent end's second call with the tool's result.
	reqs := fake.Requests()
	if last := string(reqs[len(reqs)-1].Raw); !strings.Contains(last, "tool_result") || !strings.Contains(last, "from the hands") {
		t.Fatalf("the model did not get the tool result: %s", last)
	}
}

// TestGatewayStreamError: a stream that ends with an error event after its
// first bytes reaches the agent end as the provider sent it, is not
// retried, and closes its span with is_error (no session.error: the
// agent end has the error and decides).
func TestGatewayStreamError(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	fake.Push(fakeanthropic.Text("partial answer").ThenError("overloaded_error", "Overloaded"))
	sessID, evs := gatewayTurn(t, s, provider.DefaultModel, func(ctx context.Context, tr *executor.Turn) error {
		client := anthropicClient(tr.Start.Model)
		stream := client.Messages.NewStreaming(ctx, hello(tr.Start.Model))
		n := 0
		for stream.Next() {
			n++
		}
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "overloaded_error") || n == 0 {
			return fmt.Errorf("after %d events: %v, want the stream's overloaded_error", n, err)
		}
		return nil
	})
	if e := errorStatuses(evs); len(e) != 0 {
		t.Fatalf("session errors %v", e)
	}
	if ends := spanEnds(t, s, sessID); len(ends) != 1 || !*ends[0].IsError {
		t.Fatalf("span ends %+v", ends)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Fatalf("%d calls upstream, want 1 (no retry after the first byte)", n)
	}
}

// TestGatewayInterruptClosesSpan: an interrupt while a gateway stream is
// running ends the turn; the agent end's request is cancelled with it and
// the call's span is closed (is_error), not left open.
func TestGatewayInterruptClosesSpan(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	fake.Push(fakeanthropic.Text("a slow answer that takes its time").WithDelay(500 * time.Millisecond))
	sessID, token := agentEndSessionWith(t, s, s.newAgent(t, provider.DefaultModel))
	streaming, done := make(chan struct{}, 1), make(chan error, 1)
	agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		client := anthropicClient(tr.Start.Model)
		stream := client.Messages.NewStreaming(ctx, hello(tr.Start.Model))
		for stream.Next() {
			select {
			case streaming <- struct{}{}:
			default:
			}
		}
		done <- stream.Err()
		return nil
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hi"))
	within(t, streaming, "the first event of the stream")
	s.send(t, sessID, interruptEvent())
	st.until(isIdle)
	if err := within(t, done, "the end of the agent end's stream"); err == nil {
		t.Fatal("the stream ran to its end through an interrupt")
	}
	_, evs := agentMessages(t, s, sessID)
	starts := slices.DeleteFunc(slices.Clone(evs), func(ev ma.Event) bool { return ev.Type != ma.EventSpanModelRequestStart })
	ends := spanEnds(t, s, sessID)
	if len(starts) != 1 || len(ends) != 1 || ends[0].ModelRequestStartID != starts[0].ID || !*ends[0].IsError {
		t.Fatalf("span starts %+v, ends %+v", starts, ends)
	}
}

// TestGatewayLossClosesSpan: an agent end lost while its gateway stream
// runs: the turn fails into rescheduling and the call's span is closed
// (is_error) with it, not left open until some later turn.
func TestGatewayLossClosesSpan(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	fake.Push(fakeanthropic.Text("a slow answer that takes its time").WithDelay(500 * time.Millisecond))
	sessID, token := agentEndSessionWith(t, s, s.newAgent(t, provider.DefaultModel))
	streaming := make(chan struct{}, 1)
	stop := agentEnd(t, s, token, "brain", func(ctx context.Context, tr *executor.Turn) error {
		client := anthropicClient(tr.Start.Model)
		stream := client.Messages.NewStreaming(ctx, hello(tr.Start.Model))
		for stream.Next() {
			select {
			case streaming <- struct{}{}:
			default:
			}
		}
		return stream.Err()
	})
	st := s.openStream(t, sessID)
	s.send(t, sessID, userMessage("hi"))
	within(t, streaming, "the first event of the stream")
	stop()
	st.until(func(f frame) bool { return f.Type == ma.EventStatusRescheduled })
	_, evs := agentMessages(t, s, sessID)
	starts := slices.DeleteFunc(slices.Clone(evs), func(ev ma.Event) bool { return ev.Type != ma.EventSpanModelRequestStart })
	ends := spanEnds(t, s, sessID)
	if len(starts) != 1 || len(ends) != 1 || ends[0].ModelRequestStartID != starts[0].ID || !*ends[0].IsError {
		t.Fatalf("span starts %+v, ends %+v", starts, ends)
	}
}

// TestGatewayTurnEndClosesSpan: an agent end that ends its turn while one
// of its gateway calls is still streaming: the call's span is closed
// (is_error) in the log before the session goes idle, not appended after
// the idle by the turn's clean-up (a client reading the log at the idle
// saw no end of it).
func TestGatewayTurnEndClosesSpan(t *testing.T) {
	s, fake, _ := gatewayServer(t, nil)
	fake.Push(fakeanthropic.Text("a slow answer that takes its time").WithDelay(time.Second))
	sessID, _ := gatewayTurn(t, s, provider.DefaultModel, func(ctx context.Context, tr *executor.Turn) error {
		client := anthropicClient(tr.Start.Model)
		stream := client.Messages.NewStreaming(ctx, hello(tr.Start.Model))
		if !stream.Next() {
			return fmt.Errorf("no first event: %v", stream.Err())
		}
		return nil // the turn ends with the stream still open
	})
	_, evs := agentMessages(t, s, sessID)
	idle := slices.IndexFunc(evs, func(ev ma.Event) bool { return ev.Type == ma.EventStatusIdle })
	end := slices.IndexFunc(evs, func(ev ma.Event) bool { return ev.Type == ma.EventSpanModelRequestEnd })
	if end < 0 || idle < 0 || end > idle || !*evs[end].IsError {
		types := make([]string, len(evs))
		for i, ev := range evs {
			types[i] = ev.Type
		}
		t.Fatalf("the span's end is not before the idle: %v", types)
	}
}
