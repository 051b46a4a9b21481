// Package benchclient is the benchmarks' client of a reins server: JSON
// requests and event streams over plain HTTP, which end the program on any
// failure (a benchmark that met an error has nothing to report).
package benchclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"strings"
)

// Client sends requests with an API key.
type Client struct {
	HTTP *http.Client
	Key  string
}

// Do sends method path to the server at base with body as JSON (nil:
// none) and decodes the answer into out (nil: dropped). Any status but
// 200 ends the program.
func (c *Client) Do(base, method, path string, body, out any) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			log.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("x-api-key", c.Key)
	req.Header.Set("content-type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		log.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			log.Fatal(err)
		}
	}
}

// Message is the body of a send of one user.message with text.
func Message(text string) map[string]any {
	return map[string]any{"events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}}}}
}

// Stream is an open event stream of a session.
type Stream struct {
	resp *http.Response
	r    *bufio.Reader
}

// Open opens the session's event stream at the server at base; query
// ("" or "?…") is added to the path.
func (c *Client) Open(base, sessionID, query string) *Stream {
	req, err := http.NewRequest(http.MethodGet, base+"/v1/sessions/"+sessionID+"/events/stream"+query, nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("x-api-key", c.Key)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		log.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		log.Fatalf("open stream: %s", resp.Status)
	}
	return &Stream{resp: resp, r: bufio.NewReaderSize(resp.Body, 64<<10)}
}

// Close closes the stream.
func (s *Stream) Close() { s.resp.Body.Close() }

// Next returns the next event's type and data (pings skipped).
func (s *Stream) Next() (string, []byte) {
	var typ string
	for {
		line, err := s.r.ReadSlice('\n')
		if err != nil {
			log.Fatalf("stream: %v", err)
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			typ = strings.TrimSpace(string(line[7:]))
		case bytes.HasPrefix(line, []byte("data: ")):
			if typ != "ping" {
				return typ, bytes.Clone(bytes.TrimSpace(line[6:]))
			}
		}
	}
}

// WaitFor reads events up to the first of type typ and returns its data.
func (s *Stream) WaitFor(typ string) []byte {
	for {
		if t, data := s.Next(); t == typ {
			return data
		}
	}
}
