package app

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/httpapi"
)

// TestBudgetOf: the open-file limit keeps a reserve for the server's own
// files (an eighth, at least 64, half of a small limit) and gives the
// rest to connections, half of which streams may hold.
func TestBudgetOf(t *testing.T) {
	for _, tc := range []struct{ limit, conns, streams, requests int }{
		{256, 192, 96, 96},
		{1024, 896, 448, 448},
		{20000, 17500, 8750, 8750},
		{100, 50, 25, 25},
	} {
		b := budgetOf(tc.limit)
		if b.connections != tc.conns || b.streams != tc.streams || b.requests != tc.requests {
			t.Errorf("budgetOf(%d) = %+v, want %d connections, %d streams, %d requests", tc.limit, b, tc.conns, tc.streams, tc.requests)
		}
	}
}

// TestBudgetFit: a bound of 0 becomes the budget's, one under it stays,
// one over it is lowered to it.
func TestBudgetFit(t *testing.T) {
	b := budgetOf(256)
	for _, tc := range []struct{ streams, requests, wantStreams, wantRequests int }{
		{0, 0, 96, 96},
		{10, 1024, 10, 96},
		{500, 50, 96, 50},
	} {
		hc := httpapi.Config{MaxStreams: tc.streams, MaxRequests: tc.requests}
		b.fit(&hc, slog.New(slog.DiscardHandler))
		if hc.MaxStreams != tc.wantStreams || hc.MaxRequests != tc.wantRequests {
			t.Errorf("fit(%d streams, %d requests) = %d, %d; want %d, %d", tc.streams, tc.requests, hc.MaxStreams, hc.MaxRequests, tc.wantStreams, tc.wantRequests)
		}
	}
}

// TestBoundedListener: over its bound the listener answers /healthz 200
// and anything else 503 overloaded_error with retry-after, without the
// server, and closes; a connection closed frees its place.
func TestBoundedListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newBoundedListener(inner, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	held := []net.Conn{dial(), dial()}
	served := []net.Conn{<-accepted, <-accepted}

	for _, tc := range []struct{ request, status, contains string }{
		{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "200 OK", `{"status":"ok"}`},
		{"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "503 Service Unavailable", `"type":"overloaded_error"`},
	} {
		c := dial()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, tc.request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q over the bound: %v", tc.request, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.Status != tc.status || !strings.Contains(string(body), tc.contains) || !resp.Close ||
			(resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("retry-after") != "1") {
			t.Fatalf("%q over the bound: %s %v %s", tc.request, resp.Status, resp.Header, body)
		}
		c.Close()
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection over the bound reached the server: %v", c.RemoteAddr())
	default:
	}

	served[0].Close()
	held[0].Close()
	c := dial()
	defer c.Close()
	select {
	case s := <-accepted:
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection within the bound again did not reach the server")
	}
	served[1].Close()
	held[1].Close()
}
