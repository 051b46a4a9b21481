package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// DefaultBodyTimeout bounds the time a client takes to send a request body.
const DefaultBodyTimeout = 30 * time.Second

// guardBody bounds the time the client takes to send r's body, if it has
// one: the connection's read deadline is set to now plus the body
// timeout, and cleared once the body is read to its end or closed, so
// that the response (a stream, a long poll) may take as long as it needs.
// (Go's HTTP/1 server also clears it at the body's end, as it starts
// waiting on the connection in the background; clearing it here does not
// depend on that.) A handler that leaves the body unread is covered too:
// the server reads what is left, under the deadline, before it answers.
//
// A request without a body gets no deadline: the server already waits
// on its connection in the background, and a deadline would end that
// wait and cancel the request's context (golang/go#70834).
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); err != nil {
		return // not a connection with deadlines
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: s.cfg.BodyTimeout}
}

// deadlineBody is a request body read under a connection read deadline,
// which it clears at the body's end or close. A read cut by the deadline
// fails with a 408 apiError.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	once    sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.clear()
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = errf(http.StatusRequestTimeout, ma.ErrInvalidRequest, "request body not received within %s", b.timeout)
	}
	return n, err
}

// Close closes the body, which reads what is left of it (still under the
// deadline), then clears the deadline.
func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.clear()
	return err
}

func (b *deadlineBody) clear() {
	b.once.Do(func() { b.rc.SetReadDeadline(time.Time{}) })
}
