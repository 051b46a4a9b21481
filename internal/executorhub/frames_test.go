package executorhub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/reinsdev/reins/executor"
)

// rawConn opens a plain WebSocket to the hub's connect endpoint.
func (f *fixture) rawConn(subprotocols ...string) *websocket.Conn {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := (&executor.TokenEndpoint{URL: f.srv.URL, Credential: f.envKey}).Token(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, tok.URL, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + tok.Token}},
		Subprotocols: subprotocols,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	ws.SetReadLimit(1 << 20)
	f.t.Cleanup(func() { ws.CloseNow() })
	return ws
}

// response is a JSON-RPC response as the hub writes it.
type response struct {
	ID     json.RawMessage        `json:"id"`
	Result json.RawMessage        `json:"result"`
	Error  *executor.JSONRPCError `json:"error"`
}

// exchange sends one frame and reads the response.
func exchange(t *testing.T, ws *websocket.Conn, frame string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m response
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("response %s: %v", data, err)
	}
	return m
}

func TestBadFramesKeepConnectionUsable(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ws := f.rawConn(executor.Subprotocol)
	cases := []struct {
		name, frame string
		code        int
		id          string
	}{
		{"not JSON", `{"jsonrpc": "2.0", "id": 1, "method": `, executor.CodeParseError, "null"},
		{"not JSON-RPC", `{"hello": "world", "id": 2}`, executor.CodeInvalidRequest, "2"},
		{"wrong version", `{"jsonrpc": "1.0", "id": 3, "method": "executor.heartbeat"}`, executor.CodeInvalidRequest, "3"},
		{"batch", `[{"jsonrpc": "2.0", "id": 4, "method": "x"}]`, executor.CodeInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc": "2.0", "id": 5, "method": "no.such.method", "params": {}}`, executor.CodeMethodNotFound, "5"},
		{"bad params", `{"jsonrpc": "2.0", "id": "six", "method": "executor.register", "params": {"protocol": 6}}`, executor.CodeInvalidParams, `"six"`},
		{"before register", `{"jsonrpc": "2.0", "id": 7, "method": "executor.heartbeat", "params": {"sessions": []}}`, executor.CodeUnauthorized, "7"},
	}
	for _, tc := range cases {
		m := exchange(t, ws, tc.frame)
		if m.Error == nil || m.Error.Code != tc.code || string(m.ID) != tc.id {
			t.Fatalf("%s: got id %s error %+v, want %d", tc.name, m.ID, m.Error, tc.code)
		}
		if m.Error.Message != executor.CodeMessage(tc.code) {
			t.Fatalf("%s: message %q, want %q", tc.name, m.Error.Message, executor.CodeMessage(tc.code))
		}
	}
	// Still usable: a valid registration succeeds.
	m := exchange(t, ws, `{"jsonrpc": "2.0", "id": 8, "method": "executor.register", "params": {"protocol": "reins.executor.v1", "executor": {"name": "raw"}, "capabilities": ["tool:noop"], "max_sessions": 1, "sessions": []}}`)
	if m.Error != nil || !strings.Contains(string(m.Result), "executor_id") {
		t.Fatalf("register after bad frames: %+v %s", m.Error, m.Result)
	}
}

func TestPayloadTooLarge(t *testing.T) {
	f := newFixture(t, HubOptions{MaxFrameBytes: 4096})
	ws := f.rawConn(executor.Subprotocol)
	big := `{"jsonrpc": "2.0", "id": 41, "method": "executor.heartbeat", "params": {"pad": "` + strings.Repeat("x", 8000) + `"}}`
	m := exchange(t, ws, big)
	if m.Error == nil || m.Error.Code != executor.CodePayloadTooLarge || string(m.ID) != "41" {
		t.Fatalf("oversized frame: %+v", m)
	}
	// The connection stays usable.
	m = exchange(t, ws, `{"jsonrpc": "2.0", "id": 42, "method": "nope"}`)
	if m.Error == nil || m.Error.Code != executor.CodeMethodNotFound {
		t.Fatalf("after oversized frame: %+v", m)
	}
	// An oversized frame without a readable id closes with 1009.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws.Write(ctx, websocket.MessageText, []byte(`{"pad": "`+strings.Repeat("y", 8000)+`"}`))
	_, _, err := ws.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("read after id-less oversized frame = %v, want close 1009", err)
	}
}

func TestConnectWithoutSubprotocol4003(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ws := f.rawConn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := ws.Read(ctx)
	if executor.CloseCode(err) != executor.CloseUnsupportedProtocol {
		t.Fatalf("close = %v, want 4003", err)
	}
}

func TestConnectRequiresToken(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ctx := context.Background()
	_, resp, err := websocket.Dial(ctx, executor.ConnectURL(f.srv.URL), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer reins_et_forged.sig"}}, Subprotocols: []string{executor.Subprotocol}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("dial with a forged token: %v", err)
	}
}
