package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/reinsdev/reins/internal/service"
)

// httpServer serves the API: a service. It starts before the parts it
// serves, so that it stops after them (the requests of the turns that
// drain as the harness stops are still answered), but its listener hands
// it no connection until open, once they have all started: until then,
// clients wait in the listen queue as they did before Serve.
type httpServer struct {
	srv  *http.Server
	ln   *gatedListener // set by listen
	log  *slog.Logger
	life service.Base // owns Serve
}

// newHTTPServer returns the server of handler; listen gives it its
// listener before Start.
func newHTTPServer(handler http.Handler, log *slog.Logger) *httpServer {
	// No ReadTimeout: the API bounds the time a request body takes
	// itself (httpapi.Config.BodyTimeout), answering a 408 in its error
	// envelope, and leaves requests without a body alone.
	srv := &http.Server{Handler: logRequests(handler, log), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return &httpServer{srv: srv, log: log}
}

// listen sets the listener Start serves.
func (s *httpServer) listen(ln net.Listener) {
	s.ln = &gatedListener{Listener: ln, opened: make(chan struct{}), closed: make(chan struct{})}
}

// Start serves the listener (which waits for open) until Stop; serving
// errors are logged.
func (s *httpServer) Start(ctx context.Context) error {
	if _, err := s.life.Begin(ctx); err != nil {
		return err
	}
	if s.ln == nil {
		return errors.New("no listener")
	}
	s.life.Go(func(context.Context) {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	})
	return nil
}

// open lets the server accept connections.
func (s *httpServer) open() { s.ln.openOnce.Do(func() { close(s.ln.opened) }) }

// Stop stops accepting requests and waits for those being served until
// ctx ends; then it cuts what is left rather than hang.
func (s *httpServer) Stop(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return errors.Join(err, s.life.Halt(context.WithoutCancel(ctx)))
}

// gatedListener accepts no connection until opened.
type gatedListener struct {
	net.Listener
	opened, closed      chan struct{}
	openOnce, closeOnce sync.Once
}

// Accept waits until the listener is opened, then accepts.
func (l *gatedListener) Accept() (net.Conn, error) {
	select {
	case <-l.opened:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	return l.Listener.Accept()
}

// Close closes the listener; an Accept waiting for open returns.
func (l *gatedListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
