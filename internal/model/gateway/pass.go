package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/reinsdev/reins/internal/model"
)

// pass gives the client a successful response, a stream as it arrives,
// and records the call's usage.
func (g *Gateway) pass(w http.ResponseWriter, r *http.Request, c call, span string, res *http.Response) {
	defer res.Body.Close()
	copyHeaders(w.Header(), res.Header)
	var (
		u   model.Usage
		err error
	)
	if isStream(res) {
		u, err = g.passStream(w, c, res.Body)
	} else {
		u, err = g.passBody(w, c, res)
	}
	if err != nil {
		g.log.Warn("model gateway response cut short", "model", c.turn.Model(), "err", err)
	}
	// Recorded even when the client went away: the tokens were spent.
	if rerr := c.turn.EndModelRequest(context.WithoutCancel(r.Context()), span, u, err != nil); rerr != nil {
		g.log.Warn("model gateway: recording the call", "model", c.turn.Model(), "err", rerr)
	}
}

func isStream(res *http.Response) bool {
	return strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
}

// passBody passes a JSON response on and reads its usage.
func (g *Gateway) passBody(w http.ResponseWriter, c call, res *http.Response) (model.Usage, error) {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponse+1))
	if err == nil && len(body) > maxResponse {
		err = fmt.Errorf("the response is over %d bytes", maxResponse)
	}
	if err != nil {
		c.api.writeError(w, http.StatusBadGateway, "api_error", "reading the model API's response: "+err.Error())
		return model.Usage{}, err
	}
	w.WriteHeader(res.StatusCode)
	_, werr := w.Write(body)
	return c.api.usage(body), werr
}

// passStream passes an SSE stream on event by event, flushing each, and
// reads the usage its events carry. An error event or a stream that
// breaks is a failed call.
func (g *Gateway) passStream(w http.ResponseWriter, c call, body io.Reader) (model.Usage, error) {
	// A reverse proxy (nginx) passes the events on as they come.
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var st streamState
	br := bufio.NewReader(body)
	for {
		ev, err := readEvent(br)
		if len(ev.raw) > 0 && c.api.streamEvent(ev, &st, c.strip) {
			if _, werr := w.Write(ev.raw); werr != nil {
				return st.usage, werr
			}
			_ = rc.Flush()
		}
		switch {
		case errors.Is(err, io.EOF) && !st.done && st.err == nil:
			return st.usage, errors.New("the stream ended before its last event")
		case errors.Is(err, io.EOF):
			return st.usage, st.err
		case err != nil:
			return st.usage, err
		}
	}
}

// streamState is what a stream's events said so far.
type streamState struct {
	usage model.Usage
	// done is set by the stream's last event (message_stop, [DONE]).
	done bool
	// err is set by an error event.
	err error
}

// event is one SSE event: its raw bytes (with the blank line that ends
// it), its name and its data.
type event struct {
	raw  []byte
	name string
	data []byte
}

// readEvent reads the next event; io.EOF at the stream's end.
func readEvent(br *bufio.Reader) (event, error) {
	var ev event
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: copy what the buffer holds (the next read
			// reuses it), then read the rest.
			head := append([]byte(nil), line...)
			rest, rerr := br.ReadBytes('\n')
			line, err = append(head, rest...), rerr
		}
		if len(ev.raw)+len(line) > maxResponse {
			return ev, fmt.Errorf("a stream event is over %d bytes", maxResponse)
		}
		ev.raw = append(ev.raw, line...)
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case bytes.HasPrefix(trimmed, []byte("event:")):
			ev.name = string(bytes.TrimSpace(trimmed[len("event:"):]))
		case bytes.HasPrefix(trimmed, []byte("data:")):
			ev.data = append(ev.data, bytes.TrimSpace(trimmed[len("data:"):])...)
		}
		if err != nil {
			return ev, err
		}
		if len(trimmed) == 0 {
			return ev, nil
		}
	}
}
