package executor

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"
)

func benchConnPair(b *testing.B, inline bool) (*Conn, func()) {
	srvDone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, _ := websocket.Accept(w, r, nil)
		c := NewConn(ws, ConnConfig{Handler: func(context.Context, string, json.RawMessage) (any, error) { return struct{}{}, nil },
			Inline: func(string) bool { return inline }})
		c.Serve(context.Background())
		close(srvDone)
	}))
	ws, _, err := websocket.Dial(context.Background(), "ws"+srv.URL[4:], nil)
	if err != nil {
		b.Fatal(err)
	}
	c := NewConn(ws, ConnConfig{})
	done := make(chan struct{})
	go func() { c.Serve(context.Background()); close(done) }()
	return c, func() { c.CloseWith(1000, ""); <-done; <-srvDone; srv.Close() }
}

func BenchmarkConnCall(b *testing.B) {
	for _, inline := range []bool{false, true} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		b.Run(name, func(b *testing.B) {
			c, stop := benchConnPair(b, inline)
			defer stop()
			p := map[string]string{"a": "b"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.Call(context.Background(), "x", p, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRawEcho(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, _ := websocket.Accept(w, r, nil)
		for {
			t, m, err := ws.Read(context.Background())
			if err != nil {
				return
			}
			ws.Write(context.Background(), t, m)
		}
	}))
	defer srv.Close()
	ws, _, _ := websocket.Dial(context.Background(), "ws"+srv.URL[4:], nil)
	defer ws.CloseNow()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"b"}}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws.Write(context.Background(), websocket.MessageText, msg)
		ws.Read(context.Background())
	}
}
