package httpapi

import (
	"net/http"
	"sync/atomic"
)

// counted counts in n the requests h is serving (the open event streams,
// for the server's metrics).
func counted(n *atomic.Int64, h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		n.Add(1)
		defer n.Add(-1)
		return h(w, r)
	}
}

// Streams returns the number of event streams (SSE) open now.
func (s *Server) Streams() int { return int(s.streams.Load()) }
