package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Subprotocol is the WebSocket subprotocol of reins.executor.v1.
const Subprotocol = "reins.executor.v1"

// DefaultMaxFrameBytes is the default limit on one JSON-RPC frame.
const DefaultMaxFrameBytes = 16 << 20

// WriteTimeout bounds the write of one frame: a peer that reads nothing
// for that long went silent and loses the connection ([ErrSilent]).
const WriteTimeout = 10 * time.Second

const (
	defaultRequestTimeout = 30 * time.Second
	defaultMaxInflight    = 256
)

// Defaults of the WebSocket pings each end sends (the hub's options and Options
// PingInterval and PingTimeout).
const (
	DefaultPingInterval = 10 * time.Second
	DefaultPingTimeout  = 5 * time.Second
)

// ErrSilent is why a connection ended whose peer did not answer a
// WebSocket ping within its deadline, or read nothing of a frame for
// WriteTimeout: the network between them was cut without either end
// closing the connection (a silent network cut, a frozen peer).
var ErrSilent = errors.New("executor: the peer went silent")

// pingSettings returns the ping interval and deadline of an end: the
// defaults for zero values; a negative interval disables the pings.
func pingSettings(interval, timeout time.Duration) (time.Duration, time.Duration) {
	if interval == 0 {
		interval = DefaultPingInterval
	}
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	return interval, timeout
}

// RequestHandler answers one request or notification of the peer. For a
// notification the result is discarded. An error that is (or wraps) an
// [*RPCError] keeps its code on the wire; a [*CloseAfterReply] also closes
// the connection once the error is sent.
type RequestHandler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// errMethodNotFound is returned by handlers for methods they do not serve.
var errMethodNotFound = NewRPCError(CodeMethodNotFound, "")

// Conn is a JSON-RPC 2.0 peer over one WebSocket, the connection of either
// end of reins.executor.v1: it sends requests and notifications and
// serves the peer's with its handler. [Conn.Serve] owns the read loop and
// every handler goroutine. Its methods are safe for concurrent use.
type Conn struct {
	ws             *websocket.Conn
	handler        RequestHandler
	inline         func(method string) bool
	syncReply      bool
	maxFrame       int64
	requestTimeout time.Duration
	logger         *slog.Logger
	sem            chan struct{} // bounds concurrent request handlers

	mu      sync.Mutex               // guards the fields below
	nextID  int64                    // id of the last request sent
	pending map[int64]func(*message) // response handlers by request id
	err     error                    // why the connection ended; set once

	done chan struct{} // closed when the connection ended
	wg   sync.WaitGroup

	lr io.LimitedReader // the read loop's frame reader, reused

	wmu  sync.Mutex  // serializes writes (guards the socket's writer and wdog)
	wdog *time.Timer // closes the connection when a write takes too long
}

// ConnConfig configures a [Conn].
type ConnConfig struct {
	// Handler answers the peer's requests and notifications (default:
	// every method is -32601 method_not_found).
	Handler RequestHandler
	// Inline reports the methods whose handlers never block: they run in
	// the read loop (saving a goroutine hand-off on the hot path) and only
	// their response is written from another goroutine.
	Inline func(method string) bool
	// SyncReply writes the responses of inline methods from the read loop
	// itself. Only one end of a connection may set it (the executor end):
	// the other end must always be reading, or both could block writing.
	SyncReply bool
	// MaxFrame limits one frame (default [DefaultMaxFrameBytes]).
	MaxFrame int64
	// RequestTimeout bounds a request whose context has no deadline
	// (default 30 s).
	RequestTimeout time.Duration
	// MaxInflight bounds the peer's requests handled at once (default
	// 256); beyond it a request is refused with -32011.
	MaxInflight int
	// Logger receives diagnostics (default: discarded).
	Logger *slog.Logger
}

// NewConn returns a connection over ws. Run [Conn.Serve] to read from it.
func NewConn(ws *websocket.Conn, cfg ConnConfig) *Conn {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrameBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = defaultMaxInflight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Handler == nil {
		cfg.Handler = func(context.Context, string, json.RawMessage) (any, error) { return nil, errMethodNotFound }
	}
	// Frames up to four times the limit are read and answered -32006;
	// beyond that the WebSocket library closes with 1009.
	ws.SetReadLimit(4*cfg.MaxFrame + 1024)
	c := &Conn{
		ws:             ws,
		handler:        cfg.Handler,
		inline:         cfg.Inline,
		syncReply:      cfg.SyncReply,
		maxFrame:       cfg.MaxFrame,
		requestTimeout: cfg.RequestTimeout,
		logger:         cfg.Logger,
		sem:            make(chan struct{}, cfg.MaxInflight),
		pending:        make(map[int64]func(*message)),
		done:           make(chan struct{}),
	}
	c.wdog = time.AfterFunc(time.Hour, func() {
		// A peer that reads nothing for that long went silent too.
		c.fail(fmt.Errorf("%w: a write blocked for %s", ErrSilent, WriteTimeout))
		ws.CloseNow()
	})
	c.wdog.Stop()
	return c
}

// Serve reads and dispatches frames until the connection ends or ctx is
// done, waits for its handlers and returns why the connection ended.
func (c *Conn) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() {
		c.fail(ctx.Err())
		c.ws.CloseNow()
	})
	defer stop()
	for {
		err := c.readOne(ctx)
		if err != nil {
			c.fail(err)
			c.ws.CloseNow()
			return c.Err()
		}
	}
}

// KeepAlive pings the peer every interval until the connection ends; a
// ping not answered within timeout ends the connection with [ErrSilent]
// (its read loop, Serve, must run meanwhile: it reads the pongs). A
// negative interval sends none; zero values take the defaults
// [DefaultPingInterval] and [DefaultPingTimeout].
func (c *Conn) KeepAlive(interval, timeout time.Duration) {
	interval, timeout = pingSettings(interval, timeout)
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := c.ws.Ping(ctx)
		cancel()
		if err == nil {
			continue
		}
		select {
		case <-c.done: // it ended meanwhile, for its own reason
		default:
			c.fail(fmt.Errorf("%w: no pong within %s: %w", ErrSilent, timeout, err))
			c.ws.CloseNow()
		}
		return
	}
}

// readOne reads and dispatches one frame.
func (c *Conn) readOne(ctx context.Context) error {
	// The read itself has no deadline (ending ctx closes the socket), which
	// spares a timer per frame.
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return err
	}
	buf := framePool.Get().(*bytes.Buffer)
	defer putFrame(buf)
	buf.Reset()
	c.lr = io.LimitedReader{R: r, N: c.maxFrame + 1}
	if _, err := buf.ReadFrom(&c.lr); err != nil {
		return err
	}
	data := buf.Bytes() // decodeFrame copies what it keeps
	if int64(len(data)) > c.maxFrame {
		id := idOf(data[:min(len(data), 64<<10)])
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		if string(id) == "null" {
			c.CloseWith(int(websocket.StatusMessageTooBig), "frame too large")
			return &closeError{code: int(websocket.StatusMessageTooBig), reason: "frame too large"}
		}
		c.reply(ctx, id, nil, NewRPCError(CodePayloadTooLarge, "").WithDetail(
			fmt.Sprintf("frame exceeds %d bytes", c.maxFrame)))
		return nil
	}
	if typ != websocket.MessageText {
		c.reply(ctx, nullID, nil, NewRPCError(CodeInvalidRequest, "").WithDetail("binary frames are not used"))
		return nil
	}
	m, replyID, rerr := decodeFrame(data)
	if rerr != nil {
		if replyID != nil {
			c.reply(ctx, replyID, nil, rerr)
		}
		return nil
	}
	c.dispatch(ctx, m)
	return nil
}

// dispatch hands a decoded frame to its handler: an inline request on the
// read loop, another request on a goroutine of its own (within the limit of
// requests in flight), a notification at once, a response to the call
// waiting for it.
func (c *Conn) dispatch(ctx context.Context, m *message) {
	switch {
	case m.isRequest() && c.inline != nil && c.inline(m.Method):
		c.handleInline(ctx, m)
	case m.isRequest():
		c.handleRequest(ctx, m)
	case m.isNotification():
		if _, err := c.handler(ctx, m.Method, m.Params); err != nil {
			c.logger.Debug("notification failed", "method", m.Method, "err", err)
		}
	default:
		c.deliverResponse(m)
	}
}

// handleInline runs a request the read loop answers itself (a fast
// handler): its reply is sent now, later through replyLater, or from a
// goroutine unless the connection replies synchronously.
func (c *Conn) handleInline(ctx context.Context, m *message) {
	res, err := c.handler(ctx, m.Method, m.Params)
	if later, ok := res.(replyLater); ok && err == nil {
		id := m.ID
		later(func(result any, err error) error { return c.reply(ctx, id, result, err) })
		return
	}
	if c.syncReply {
		c.reply(ctx, m.ID, res, err)
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.reply(ctx, m.ID, res, err)
	}()
}

// handleRequest runs a request on a goroutine of its own, or refuses it
// when as many as the connection allows are in flight.
func (c *Conn) handleRequest(ctx context.Context, m *message) {
	select {
	case c.sem <- struct{}{}:
	default:
		c.reply(ctx, m.ID, nil, NewRPCError(CodeResourceUnavailable, "").WithDetail("too many requests in flight"))
		return
	}
	c.wg.Add(1)
	go func() {
		defer func() { <-c.sem; c.wg.Done() }()
		res, err := c.handler(ctx, m.Method, m.Params)
		c.reply(ctx, m.ID, res, err)
	}()
}

// deliverResponse hands a response to the call waiting for its id; a
// response to no call of this connection is dropped.
func (c *Conn) deliverResponse(m *message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return // not one of ours
	}
	c.mu.Lock()
	deliver := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if deliver != nil {
		deliver(m)
	}
}

// replyLater is what an inline handler returns to answer its request
// later: it is called at once, from the read loop, with the function that
// sends the answer (which it must not call from the read loop itself
// unless the connection has syncReply).
type replyLater func(answer func(result any, err error) error)

// reply sends the response to a request and returns the write error.
func (c *Conn) reply(ctx context.Context, id json.RawMessage, result any, err error) error {
	m := &message{JSONRPC: "2.0", ID: id}
	if err != nil {
		m.Error = ptr(toRPCError(err).ToWire())
	} else {
		b, merr := marshal(result)
		if merr != nil {
			m.Error = ptr(NewRPCError(CodeInternalError, "").WithDetail(merr.Error()).ToWire())
		} else {
			m.Result = b
		}
	}
	werr := c.write(ctx, m)
	if werr != nil {
		c.logger.Debug("write response", "err", werr)
	}
	var ca *CloseAfterReply
	if errors.As(err, &ca) {
		c.CloseWith(ca.Code, ca.Reason)
	}
	return werr
}

// CloseAfterReply is a handler error that closes the connection with a
// close code once the error response (Err) is written.
type CloseAfterReply struct {
	Err    *RPCError
	Code   int
	Reason string
}

// Error returns Err's message.
func (e *CloseAfterReply) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *CloseAfterReply) Unwrap() error { return e.Err }

func ptr[T any](v T) *T { return &v }

// toRPCError turns a handler error into the error sent on the wire.
func toRPCError(err error) *RPCError {
	var re *RPCError
	switch {
	case errors.As(err, &re):
		return re
	case errors.Is(err, context.DeadlineExceeded):
		return NewRPCError(CodeTimeout, "").WithDetail(err.Error())
	case errors.Is(err, context.Canceled):
		return NewRPCError(CodeCanceled, "").WithDetail(err.Error())
	case errors.Is(err, ErrSessionEnded):
		return NewRPCError(CodeSessionNotActive, "").WithDetail(err.Error())
	}
	return NewRPCError(CodeInternalError, "").WithDetail(err.Error())
}

// framePool holds frame buffers: a frame is read into one, decoded (the
// decoder copies what it keeps) and the buffer is reused.
var framePool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putFrame(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 { // do not keep the memory of large frames
		framePool.Put(b)
	}
}

// encodeFrame writes m as one JSON object. Params and Result are already
// JSON (made by json.Marshal or received and validated), so they are copied
// as they are rather than re-validated.
func encodeFrame(buf *bytes.Buffer, m *message) error {
	buf.WriteString(`{"jsonrpc":"2.0"`)
	if m.ID != nil {
		buf.WriteString(`,"id":`)
		buf.Write(m.ID)
	}
	if m.Method != "" {
		buf.WriteString(`,"method":`)
		b, ok := appendString(buf.AvailableBuffer(), m.Method)
		if !ok {
			return fmt.Errorf("executor: method %q is not valid UTF-8", m.Method)
		}
		buf.Write(b)
	}
	if m.Params != nil {
		buf.WriteString(`,"params":`)
		buf.Write(m.Params)
	}
	if m.Error != nil {
		b, err := json.Marshal(m.Error)
		if err != nil {
			return err
		}
		buf.WriteString(`,"error":`)
		buf.Write(b)
	} else if m.ID != nil && m.Method == "" {
		buf.WriteString(`,"result":`)
		if m.Result == nil {
			buf.WriteString("null")
		} else {
			buf.Write(m.Result)
		}
	}
	buf.WriteByte('}')
	return nil
}

func (c *Conn) write(ctx context.Context, m *message) error {
	buf := framePool.Get().(*bytes.Buffer)
	defer putFrame(buf)
	buf.Reset()
	if err := encodeFrame(buf, m); err != nil {
		return err
	}
	b := buf.Bytes()
	if int64(len(b)) > c.maxFrame {
		return NewRPCError(CodePayloadTooLarge, "").WithDetail(fmt.Sprintf("message of %d bytes exceeds %d", len(b), c.maxFrame))
	}
	// One write at a time, watched by one reusable timer: a peer that stops
	// reading for WriteTimeout loses the connection. (A context deadline
	// per write would cost a timer and several allocations per frame.)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wdog.Reset(WriteTimeout)
	err := c.ws.Write(context.Background(), websocket.MessageText, b)
	c.wdog.Stop()
	return err
}

// Call sends a request and decodes its result into result (unless nil).
// Without a deadline in ctx the request times out after requestTimeout
// with a *RequestTimeoutError.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	p, err := marshal(params)
	if err != nil {
		return fmt.Errorf("executor: encode %s params: %w", method, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.requestTimeout)
		defer cancel()
	}
	ch := make(chan *message, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.lostErr()
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = func(m *message) { ch <- m }
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	req := &message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p}
	if err := c.write(ctx, req); err != nil {
		forget()
		var re *RPCError
		if errors.As(err, &re) {
			return re
		}
		select {
		case <-c.done:
			return c.lostErr()
		default:
		}
		return fmt.Errorf("executor: send %s: %w", method, err)
	}
	answer := func(m *message) error {
		if m.Error != nil {
			return &RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
		}
		if result != nil {
			if err := unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("executor: decode %s result: %w", method, err)
			}
		}
		return nil
	}
	select {
	case m := <-ch:
		return answer(m)
	case <-ctx.Done():
		forget()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &RequestTimeoutError{Method: method}
		}
		return ctx.Err()
	case <-c.done:
		forget()
		select {
		case m := <-ch: // answered just before the connection ended
			return answer(m)
		default:
		}
		return c.lostErr()
	}
}

// CallAsync sends a request without waiting: done is called with the
// response from the read loop (it must not block), or with an error if the
// request could not be sent. If the connection ends first, done is never
// called: the caller watches the connection's end itself.
func (c *Conn) CallAsync(ctx context.Context, method string, params any, done func(result json.RawMessage, err error)) {
	p, err := marshal(params)
	if err != nil {
		done(nil, fmt.Errorf("executor: encode %s params: %w", method, err))
		return
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		done(nil, c.lostErr())
		return
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = func(m *message) {
		if m.Error != nil {
			done(nil, &RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data})
			return
		}
		done(m.Result, nil)
	}
	c.mu.Unlock()
	req := &message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: p}
	if err := c.write(ctx, req); err != nil {
		c.mu.Lock()
		_, mine := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if mine {
			done(nil, err)
		}
	}
}

// Notify sends a notification.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	p, err := marshal(params)
	if err != nil {
		return fmt.Errorf("executor: encode %s params: %w", method, err)
	}
	if err := c.write(ctx, &message{JSONRPC: "2.0", Method: method, Params: p}); err != nil {
		select {
		case <-c.done:
			return c.lostErr()
		default:
		}
		return err
	}
	return nil
}

func (c *Conn) lostErr() error {
	return fmt.Errorf("%w: %w", ErrNotConnected, c.Err())
}

// Err returns why the connection ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail records why the connection ended (the first reason wins) and
// releases every waiting call.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if err == nil {
		err = io.EOF
	}
	c.err = err
	close(c.done)
}

// CloseWith closes the connection with a close code. The close code is
// what Err reports.
func (c *Conn) CloseWith(code int, reason string) {
	c.fail(&closeError{code: code, reason: reason})
	c.ws.Close(websocket.StatusCode(code), reason)
}
