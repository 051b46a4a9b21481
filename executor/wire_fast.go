package executor

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Fast codecs of the frames on a tool call's path; see jsonfast.go. Each
// returns false when the value is not in the plain shape, and the caller
// then uses encoding/json.

// fastEncoder is a value with a reflection-free JSON encoding.
type fastEncoder interface {
	appendJSON(b []byte) ([]byte, bool)
}

// fastDecoder is a value with a reflection-free JSON decoding. On false
// it is left unchanged.
type fastDecoder interface {
	decodeFast(data []byte) bool
}

// marshal encodes v, on its fast path when it has one.
func marshal(v any) ([]byte, error) {
	if f, ok := v.(fastEncoder); ok {
		if b, ok := f.appendJSON(make([]byte, 0, 256)); ok {
			return b, nil
		}
	}
	return json.Marshal(v)
}

// unmarshal decodes data into v, on its fast path when it has one.
func unmarshal(data []byte, v any) error {
	if f, ok := v.(fastDecoder); ok && f.decodeFast(data) {
		return nil
	}
	return json.Unmarshal(data, v)
}

// DecodeParams decodes the params of a request or notification into v (on
// its fast path for the protocol's hot messages). Missing or malformed
// params are a -32602 invalid_params error, which a [RequestHandler]
// returns as it is.
func DecodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return NewRPCError(CodeInvalidParams, "").WithDetail("params are required")
	}
	if err := unmarshal(params, v); err != nil {
		return NewRPCError(CodeInvalidParams, "").WithDetail(err.Error())
	}
	return nil
}

// rawFrame is a frame split into its members, before the JSON-RPC rules
// are checked.
type rawFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"` // "" is absent or empty: invalid either way
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

var frameKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

var (
	versions = []string{"2.0"}
	methods  = []string{
		MethodToolCall, MethodToolCancel, MethodToolResult, MethodHeartbeat,
		MethodRegister, MethodClose, MethodSessionAssign, MethodSessionRelease,
		MethodProcessStart, MethodProcessSignal, MethodProcessExit,
		MethodTerminalOpen, MethodTerminalInput, MethodTerminalResize, MethodTerminalClose,
		MethodTerminalOutput, MethodTerminalExit,
	}
	blockTypes = []string{"text"}
)

// decodeFast splits a frame (which it copies) into its members.
func (f *rawFrame) decodeFast(data []byte) bool {
	s := jsonScan{b: bytes.Clone(data)}
	var r rawFrame
	ok := s.readObject(frameKeys, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			r.JSONRPC, ok = s.word(versions)
		case 1:
			r.ID, ok = s.raw()
		case 2:
			r.Method, ok = s.word(methods)
		case 3:
			r.Params, ok = s.raw()
		case 4:
			r.Result, ok = s.raw()
		case 5:
			r.Error, ok = s.raw()
		}
		return ok
	})
	if !ok || !s.atEnd() {
		return false
	}
	*f = r
	return true
}

var toolCallKeys = []string{"session_id", "lease_id", "tool_call_id", "name", "input", "timeout_ms"}

func (p *ToolCallParams) decodeFast(data []byte) bool {
	s := jsonScan{b: data}
	var r ToolCallParams
	ok := s.readObject(toolCallKeys, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			r.SessionID, ok = s.text()
		case 1:
			r.LeaseID, ok = s.text()
		case 2:
			r.ToolCallID, ok = s.text()
		case 3:
			r.Name, ok = s.text()
		case 4:
			r.Input, ok = s.raw() // aliases data, like the frame's params
		case 5:
			r.TimeoutMS, ok = s.integer()
		}
		return ok
	})
	if !ok || !s.atEnd() {
		return false
	}
	*p = r
	return true
}

func (p ToolCallParams) appendJSON(b []byte) ([]byte, bool) {
	var ok [5]bool
	b = append(b, `{"session_id":`...)
	b, ok[0] = appendString(b, p.SessionID)
	b = append(b, `,"lease_id":`...)
	b, ok[1] = appendString(b, p.LeaseID)
	b = append(b, `,"tool_call_id":`...)
	b, ok[2] = appendString(b, p.ToolCallID)
	b = append(b, `,"name":`...)
	b, ok[3] = appendString(b, p.Name)
	b = append(b, `,"input":`...)
	b, ok[4] = appendRaw(b, p.Input)
	if p.TimeoutMS != 0 {
		b = append(b, `,"timeout_ms":`...)
		b = strconv.AppendInt(b, p.TimeoutMS, 10)
	}
	return append(b, '}'), ok == [5]bool{true, true, true, true, true}
}

var ackKeys = []string{"accepted", "result"}

func (a *ToolCallAck) decodeFast(data []byte) bool {
	s := jsonScan{b: data}
	var r ToolCallAck
	ok := s.readObject(ackKeys, func(k int) bool {
		if k == 0 {
			var ok bool
			r.Accepted, ok = s.boolean()
			return ok
		}
		r.Result = new(ToolResult)
		return r.Result.read(&s)
	})
	if !ok || !s.atEnd() {
		return false
	}
	*a = r
	return true
}

func (a ToolCallAck) appendJSON(b []byte) ([]byte, bool) {
	b = strconv.AppendBool(append(b, `{"accepted":`...), a.Accepted)
	ok := true
	if a.Result != nil {
		b = append(b, `,"result":`...)
		b, ok = a.Result.appendJSON(b)
	}
	return append(b, '}'), ok
}

var resultKeys = []string{"content", "is_error", "error_code"}
var blockKeys = []string{"type", "text"}

// read reads a tool result object.
func (r *ToolResult) read(s *jsonScan) bool {
	return s.readObject(resultKeys, func(k int) bool {
		var ok bool
		switch k {
		case 0:
			r.Content = make([]ContentBlock, 0, 1)
			ok = s.array(func() bool {
				r.Content = append(r.Content, ContentBlock{})
				cb := &r.Content[len(r.Content)-1]
				return s.readObject(blockKeys, func(k int) bool {
					var ok bool
					if k == 0 {
						cb.Type, ok = s.word(blockTypes)
					} else {
						cb.Text, ok = s.text()
					}
					return ok
				})
			})
		case 1:
			r.IsError, ok = s.boolean()
		case 2:
			r.ErrorCode, ok = s.text()
		}
		return ok
	})
}

func (r *ToolResult) appendJSON(b []byte) ([]byte, bool) {
	ok := true
	b = append(b, `{"content":`...)
	if r.Content == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, cb := range r.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var okType, okText = true, true
			b = append(b, `{"type":`...)
			b, okType = appendString(b, cb.Type)
			if cb.Text != "" {
				b = append(b, `,"text":`...)
				b, okText = appendString(b, cb.Text)
			}
			b = append(b, '}')
			ok = ok && okType && okText
		}
		b = append(b, ']')
	}
	b = strconv.AppendBool(append(b, `,"is_error":`...), r.IsError)
	if r.ErrorCode != "" {
		var okCode bool
		b = append(b, `,"error_code":`...)
		b, okCode = appendString(b, r.ErrorCode)
		ok = ok && okCode
	}
	return append(b, '}'), ok
}
