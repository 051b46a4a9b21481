package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

// TestShutdown: calls cut off by Shutdown answer cancelled, new calls
// answer unavailable, and a handler that ignores cancellation makes
// Shutdown run out of budget with cleanup_failed.
func TestShutdown(t *testing.T) {
	opts := fixtureOptions()
	opts.Logger = quietLogger()
	h := &hooks{started: make(chan string), release: make(chan struct{})}
	srv := newFixture(opts, h)
	url := httpServer(t, srv, true)
	s, _ := httpSession(t, url, clientConfig{})

	var wg sync.WaitGroup
	var blocked, stubborn *sdk.CallToolResult
	wg.Go(func() { blocked = s.call(true, "block", map[string]any{}) })
	<-h.started
	wg.Go(func() { stubborn = s.call(true, "stubborn", map[string]any{}) })
	<-h.started

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := srv.Shutdown(ctx)
	var f *mcp.Failure
	if !errors.As(err, &f) || f.Code() != mcp.CodeCleanupFailed {
		t.Fatalf("Shutdown = %v, want cleanup_failed", err)
	}
	wantFailure(t, s.call(true, "echo", map[string]any{"text": "x"}), mcp.CodeUnavailable)
	close(h.release)
	wg.Wait()
	wantFailure(t, blocked, mcp.CodeCancelled)
	if stubborn.IsError {
		t.Errorf("stubborn: %s", dump(stubborn))
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestCallerCancel: a caller that cancels its request gets its handler
// cancelled, classified as cancelled; the private cause is only logged.
func TestCallerCancel(t *testing.T) {
	var logs syncBuffer
	opts := fixtureOptions()
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	h := &hooks{started: make(chan string), release: make(chan struct{})}
	url := httpServer(t, newFixture(opts, h), true)
	s, _ := httpSession(t, url, clientConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "block"}})
		done <- err
	}()
	<-h.started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `"code":"cancelled"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no cancelled failure logged: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Private causes are logged.
	s.call(true, "plain_error", map[string]any{})
	if !strings.Contains(logs.String(), secret) {
		t.Errorf("cause not logged")
	}
}

// TestWireCeiling: with the result budget disabled, the 16 MiB wire
// ceiling still refuses a result; an oversized request body is refused
// by the transport.
func TestWireCeiling(t *testing.T) {
	opts := fixtureOptions()
	opts.Logger = quietLogger()
	opts.ResultBudget = -1
	url := httpServer(t, newFixture(opts, nil), true)
	s, _ := httpSession(t, url, clientConfig{})
	f := wantFailure(t, s.call(true, "big", map[string]any{"bytes": mcp.WireCeiling + 1}), mcp.CodeResultTooLarge)
	if !strings.Contains(f.Message, "wire ceiling") {
		t.Errorf("message %q", f.Message)
	}
	if res := s.call(true, "big", map[string]any{"bytes": 2 << 20}); res.IsError {
		t.Errorf("2 MiB result failed without a budget: %s", dump(res)[:200])
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", mcp.WireCeiling) + `"}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&reply)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || reply.Error.Code != -32600 {
		t.Errorf("oversized frame: status %d, reply %+v (%v)", resp.StatusCode, reply, err)
	}
}

// TestResources: a partial bundle reports per-item issues under the
// module's _meta key; a failed read is a JSON-RPC error with safe data.
func TestResources(t *testing.T) {
	s := stdioSession(t, clientConfig{})
	ctx := context.Background()
	res, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://bundle"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Text != "hello" {
		t.Fatalf("contents: %s", dump(res.Contents))
	}
	var meta struct {
		Partial bool `json:"partial"`
		Issues  []struct {
			URI, Code, Message string
			Retryable          bool
		} `json:"issues"`
	}
	if err := json.Unmarshal(mustJSON(res.Meta[mcp.ResourceReadMetaKey]), &meta); err != nil || !meta.Partial {
		t.Fatalf("meta: %s", dump(res.Meta))
	}
	want := map[string]string{"test://bundle/b": "read_failed", "test://bundle/c": "unavailable",
		"test://bundle/d": "timeout", "test://bundle/e": "invalid_content", "test://bundle/f": "budget_exceeded"}
	for _, is := range meta.Issues {
		if want[is.URI] != is.Code || is.Retryable != (is.Code == "read_failed") || is.Message == "" {
			t.Errorf("issue %+v", is)
		}
		delete(want, is.URI)
	}
	if len(want) != 0 || strings.Contains(dump(res), secret) {
		t.Errorf("missing issues %v or leaked cause", want)
	}
	_, err = s.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://broken"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("broken read: %v", err)
	}
	var data struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Retryable bool   `json:"retryable"`
	}
	if err := json.Unmarshal(we.Data, &data); err != nil || data.Code != "read_failed" || !data.Retryable || strings.Contains(string(we.Data), secret) {
		t.Errorf("error data %s", we.Data)
	}
	// Approved views are resources; the Apps extension is advertised.
	vr, err := s.ReadResource(ctx, &sdk.ReadResourceParams{URI: "ui://fixture/approved"})
	if err != nil || vr.Contents[0].MIMEType != mcp.ViewMIMEType {
		t.Errorf("view read: %v %s", err, dump(vr))
	}
}

// TestPromptExpiry: a token presented after its prompt expired is stale.
// The clock is synctest's.
func TestPromptExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := fixtureOptions()
		opts.Logger = quietLogger()
		opts.Mode = mcp.Direct
		opts.PromptTTL = time.Minute
		srv := newFixture(opts, nil)
		st, ct := sdk.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = srv.Run(ctx, st) }()
		c := clientConfig{noMRTR: true, caps: &sdk.ClientCapabilities{
			Elicitation: &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}}}
		cs, err := c.client().Connect(ctx, ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		s := &session{cs, t}
		args := map[string]any{"target": "db"}
		tok, id := firstStep(t, s, false, "confirm", args)
		time.Sleep(59 * time.Second)
		res, _ := answer(s, false, "confirm", args, tok, id, "accept")
		structuredOf(t, res)
		tok, id = firstStep(t, s, false, "confirm", args)
		time.Sleep(61 * time.Second)
		res, _ = answer(s, false, "confirm", args, tok, id, "accept")
		wantFailure(t, res, mcp.CodeContinuationStale)
	})
}
