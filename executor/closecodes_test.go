package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// refusingHarness is a harness end that refuses every registration of
// another protocol version, as the hub does: -32010, then close 4003.
func refusingHarness(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		return
	}
	conn := NewConn(ws, ConnConfig{Handler: func(_ context.Context, method string, params json.RawMessage) (any, error) {
		var p RegisterParams
		if method != MethodRegister {
			return nil, errMethodNotFound
		}
		if err := DecodeParams(params, &p); err != nil || p.Protocol == Subprotocol {
			return nil, NewRPCError(CodeInvalidParams, "").WithDetail("this harness only refuses")
		}
		return nil, &CloseAfterReply{Err: NewRPCError(CodeUnsupportedProtocol, ""), Code: CloseUnsupportedProtocol, Reason: "unsupported protocol"}
	}})
	conn.Serve(r.Context())
}

// staticToken hands out one executor token for a connect URL.
type staticToken string

func (u staticToken) Token(context.Context) (Token, error) {
	return Token{Token: "t", ExpiresAt: time.Now().Add(time.Hour), URL: string(u)}, nil
}

// noSessions opens no session.
type noSessions struct{}

func (noSessions) OpenSession(context.Context, Assignment) (Session, error) {
	return nil, errors.New("no sessions here")
}

// TestUnsupportedProtocol4003: a client whose protocol the harness does
// not speak stops for good, with the -32010 answer and the close 4003.
func TestUnsupportedProtocol4003(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(refusingHarness))
	defer srv.Close()
	c := NewClient(Options{URL: srv.URL, TokenSource: staticToken(ConnectURL(srv.URL)), Sessions: noSessions{}, Capabilities: []string{"tool:noop"},
		Executor: ExecutorInfo{Name: "old"}, BackoffMin: time.Millisecond})
	c.protocol = "reins.executor.v0"
	go c.Run(context.Background())
	var err error
	select {
	case <-c.Done():
		err = c.Err()
	case <-time.After(15 * time.Second):
		t.Fatal("client did not end")
	}
	var re *RPCError
	if !errors.Is(err, ErrClientStopped) || CloseCode(err) != CloseUnsupportedProtocol || !errors.As(err, &re) || re.Code != CodeUnsupportedProtocol {
		t.Fatalf("Err = %v (close %d), want ErrClientStopped with -32010 and 4003", err, CloseCode(err))
	}
	if !IsTerminalCloseCode(CloseCode(err)) {
		t.Fatal("4003 is terminal")
	}
}
