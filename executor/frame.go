package executor

import (
	"bytes"
	"encoding/json"
	"errors"
)

// message is one JSON-RPC 2.0 message: a request (Method and ID), a
// notification (Method, no ID) or a response (ID with Result or Error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *JSONRPCError   `json:"error,omitempty"`
}

func (m *message) isRequest() bool      { return m.Method != "" && m.ID != nil }
func (m *message) isNotification() bool { return m.Method != "" && m.ID == nil }

var nullID = json.RawMessage("null")

// decodeFrame parses one text frame. On failure it returns the error to
// answer with and, when it could be read, the id to answer to (else null).
func decodeFrame(data []byte) (*message, json.RawMessage, *RPCError) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		if !json.Valid(data) {
			return nil, nullID, NewRPCError(CodeParseError, "")
		}
		detail := "a frame holds one JSON-RPC object"
		if len(data) > 0 && data[0] == '[' {
			detail = "batches are not supported"
		}
		return nil, nullID, NewRPCError(CodeInvalidRequest, "").WithDetail(detail)
	}
	var raw rawFrame
	if !raw.decodeFast(data) {
		if err := json.Unmarshal(data, &raw); err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, nullID, NewRPCError(CodeParseError, "")
			}
			return nil, idOf(data), NewRPCError(CodeInvalidRequest, "").WithDetail(err.Error())
		}
	}
	if bytes.Equal(raw.Error, nullID) {
		raw.Error = nil
	}
	id := raw.ID
	if id != nil && !validID(id) {
		return nil, nullID, NewRPCError(CodeInvalidRequest, "").WithDetail("id must be a string, a number or null")
	}
	replyID := id
	if replyID == nil {
		replyID = nullID
	}
	if raw.JSONRPC != "2.0" {
		return nil, replyID, NewRPCError(CodeInvalidRequest, "").WithDetail(`jsonrpc must be "2.0"`)
	}
	m := &message{JSONRPC: "2.0", ID: id}
	switch {
	case raw.Method != "":
		if raw.Result != nil || raw.Error != nil {
			return nil, replyID, NewRPCError(CodeInvalidRequest, "").WithDetail("a request has no result or error")
		}
		if len(raw.Params) > 0 && raw.Params[0] != '{' && raw.Params[0] != '[' && !bytes.Equal(raw.Params, nullID) {
			return nil, replyID, NewRPCError(CodeInvalidRequest, "").WithDetail("params must be an object or an array")
		}
		if bytes.Equal(id, nullID) {
			return nil, nullID, NewRPCError(CodeInvalidRequest, "").WithDetail("a request id must not be null")
		}
		m.Method = raw.Method
		m.Params = raw.Params
	case id != nil && (raw.Result != nil) != (raw.Error != nil):
		m.Result = raw.Result
		if raw.Error != nil {
			var e JSONRPCError
			if err := json.Unmarshal(raw.Error, &e); err != nil {
				return nil, nil, NewRPCError(CodeInvalidRequest, "").WithDetail("malformed error object")
			}
			m.Error = &e
		}
	default:
		return nil, replyID, NewRPCError(CodeInvalidRequest, "").WithDetail("neither a request nor a response")
	}
	return m, nil, nil
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', 'n':
		return true
	case '{', '[', 't', 'f':
		return false
	}
	return true // a number
}

// idOf reads the top-level "id" member of a (possibly truncated) object, or
// returns null when it cannot.
func idOf(data []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nullID
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nullID
		}
		key, _ := t.(string)
		var v json.RawMessage
		if key != "id" {
			// Skip the value without keeping it.
			if err := skipValue(dec); err != nil {
				return nullID
			}
			continue
		}
		if err := dec.Decode(&v); err != nil || !validID(v) {
			return nullID
		}
		return v
	}
	return nullID
}

func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}
