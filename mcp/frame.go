package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// lockedWriter serialises writes, so that the frame guard's error replies
// never interleave with the SDK's messages (each written in one call).
type lockedWriter struct {
	mu sync.Mutex // held for each write to w
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// frameGuard passes newline-delimited frames through to the SDK and
// answers a frame longer than the limit with a JSON-RPC error instead,
// skipping it, so that one oversized frame does not end the connection.
type frameGuard struct {
	r       *bufio.Reader
	c       io.Closer
	w       io.Writer
	limit   int
	pending []byte
}

func newFrameGuard(r io.ReadCloser, w io.Writer, limit int) *frameGuard {
	return &frameGuard{r: bufio.NewReaderSize(r, 64<<10), c: r, w: w, limit: limit}
}

// oversizedReply is the JSON-RPC error for a skipped frame; its id is null
// because the frame was never parsed.
func oversizedReply(limit int) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"frame exceeds the %d-byte wire ceiling"}}`+"\n", limit)
}

func (g *frameGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.line()
		if err != nil && len(line) == 0 {
			return 0, err
		}
		g.pending = line
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// line reads one frame, or answers and skips an oversized one.
func (g *frameGuard) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := g.r.ReadSlice('\n')
		n := len(buf) + len(chunk)
		if bytes.HasSuffix(chunk, []byte{'\n'}) {
			n-- // the newline is not part of the frame
		}
		if n > g.limit {
			serr := g.skip(err)
			if _, werr := g.w.Write(oversizedReply(g.limit)); werr != nil {
				return nil, werr
			}
			if serr != nil {
				return nil, serr
			}
			buf = buf[:0]
			continue
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, err
		}
	}
}

// skip discards the rest of the current frame.
func (g *frameGuard) skip(err error) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = g.r.ReadSlice('\n')
	}
	if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		return err
	}
	return nil
}

func (g *frameGuard) Close() error { return g.c.Close() }
