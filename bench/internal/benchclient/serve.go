package benchclient

import (
	"context"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/httpapi"
)

// Server is a reins app serving on a loopback port, with an API key.
type Server struct {
	App *app.App
	URL string
	Key string
}

// Serve starts the app of cfg on a loopback port with an API key; any
// failure ends the program.
func Serve(ctx context.Context, cfg app.Config) *Server {
	a, err := app.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	key, _, err := httpapi.CreateKey(ctx, a.Store, "bench")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Start(ctx, ln); err != nil {
		log.Fatal(err)
	}
	return &Server{App: a, URL: "http://" + ln.Addr().String(), Key: key}
}

// Client is a client of the server with the server's key, over tr.
func (s *Server) Client(tr http.RoundTripper) *Client {
	return &Client{HTTP: &http.Client{Transport: tr}, Key: s.Key}
}

// Close shuts the app down, within 10 s.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.App.Shutdown(ctx)
}
