package executor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// The fast codecs must agree with encoding/json wherever they answer; the
// fuzz tests below check that on any input, and the unit tests check that
// the frames the protocol actually sends do take the fast path.

var fastFrames = []string{
	`{"jsonrpc":"2.0","id":12345,"method":"tool.call","params":{"session_id":"sess_1","lease_id":"lease_1","tool_call_id":"call_1","name":"bash","input":{"command":"ls -la \"dir\"\n"},"timeout_ms":30000}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"accepted":true,"result":{"content":[{"type":"text","text":"a\tb\u003c\u00e9 ü"}],"is_error":true,"error_code":"timeout"}}}`,
	`{"jsonrpc":"2.0","id":"x","result":{"accepted":true}}`,
	` { "jsonrpc" : "2.0" , "method" : "tool.cancel" , "params" : { "session_id" : "s" , "x" : [1, -2.5e3, true, null, {}] } } `,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32006,"message":"payload_too_large"}}`,
}

func TestFastPathTaken(t *testing.T) {
	for _, f := range fastFrames {
		var r rawFrame
		if !r.decodeFast([]byte(f)) {
			t.Fatalf("frame took the slow path: %s", f)
		}
	}
	var p ToolCallParams
	if !p.decodeFast([]byte(`{"session_id":"s","lease_id":"l","tool_call_id":"c","name":"read","input":{"path":"a/b.go","ranges":[[1,2]]},"timeout_ms":5}`)) {
		t.Fatal("tool.call params took the slow path")
	}
	var a ToolCallAck
	if !a.decodeFast([]byte(`{"accepted":true,"result":{"content":[{"type":"text","text":"line\n\u0026 \"q\""}],"is_error":false}}`)) {
		t.Fatal("acknowledgement took the slow path")
	}
	if a.Result.Content[0].Text != "line\n& \"q\"" {
		t.Fatalf("text = %q", a.Result.Content[0].Text)
	}
}

func TestFastPathFallsBack(t *testing.T) {
	for _, f := range []string{
		`{"jsonrpc":"2.0","ID":1,"method":"x"}`,              // case-folded key
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,       // duplicate
		`{"jsonrpc":"2.0","id":1,"method":null}`,             // null string
		`{"jsonrpc":"2.0","id":1,"method":"\ud83d\ude00"}`,   // surrogate escape
		`{"jsonrpc":"2.0","id":1,"method":"x"} x`,            // trailing data
		`{"jsonrpc":"2.0","id":01}`,                          // bad number
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", // invalid UTF-8
	} {
		var r rawFrame
		if r.decodeFast([]byte(f)) {
			t.Errorf("fast path accepted %s", f)
		}
	}
}

func TestFastEncodersMatchEncodingJSON(t *testing.T) {
	p := ToolCallParams{SessionID: "s\"1", LeaseID: "l\n", ToolCallID: "c<>&", Name: "bash", Input: json.RawMessage(`{"a": [1, 2]}`), TimeoutMS: 9}
	b, ok := p.appendJSON(nil)
	if !ok {
		t.Fatal("not encoded")
	}
	var back ToolCallParams
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(canonToolCall(back), canonToolCall(p)) {
		t.Fatalf("round trip: %+v != %+v", back, p)
	}
	a := ToolCallAck{Accepted: true, Result: &ToolResult{Content: []ContentBlock{TextBlock("x\x01y"), {Type: "image"}}, IsError: true, ErrorCode: "e"}}
	b, ok = a.appendJSON(nil)
	if !ok {
		t.Fatal("not encoded")
	}
	want, _ := json.Marshal(a)
	var got, exp any
	json.Unmarshal(b, &got)
	json.Unmarshal(want, &exp)
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("got %s, encoding/json gives %s", b, want)
	}
	if _, ok := (ToolCallParams{SessionID: "\xff"}).appendJSON(nil); ok {
		t.Fatal("invalid UTF-8 must fall back")
	}
	if _, ok := (ToolCallParams{Input: json.RawMessage(`{`)}).appendJSON(nil); ok {
		t.Fatal("invalid input must fall back")
	}
}

func canonToolCall(p ToolCallParams) ToolCallParams {
	var buf bytes.Buffer
	if len(p.Input) == 0 {
		p.Input = json.RawMessage("null") // what encoding/json sends for none
	}
	json.Compact(&buf, p.Input)
	p.Input = buf.Bytes()
	return p
}

func FuzzFastFrame(f *testing.F) {
	for _, s := range fastFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast rawFrame
		if !fast.decodeFast(data) {
			return
		}
		var slow rawFrame
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v\nslow %+v\ninput %q", fast, slow, data)
		}
	})
}

func FuzzFastToolCall(f *testing.F) {
	f.Add([]byte(`{"session_id":"s","lease_id":"l","tool_call_id":"c","name":"bash","input":{"command":"echo \"hi\""},"timeout_ms":1000}`))
	f.Add([]byte(`{"session_id":"s\u00e9","name":"x","input":null,"other":[{"a":1}],"timeout_ms":-3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast ToolCallParams
		if !fast.decodeFast(data) {
			return
		}
		var slow ToolCallParams
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v\nslow %+v\ninput %q", fast, slow, data)
		}
		b, ok := fast.appendJSON(nil)
		if !ok {
			return
		}
		var back ToolCallParams
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(canonToolCall(back), canonToolCall(fast)) {
			t.Fatalf("re-encoded %q: %v", b, err)
		}
	})
}

func FuzzFastAck(f *testing.F) {
	f.Add([]byte(`{"accepted":true,"result":{"content":[{"type":"text","text":"ok\n"}],"is_error":false}}`))
	f.Add([]byte(`{"accepted":false}`))
	f.Add([]byte(`{"accepted":true,"result":{"content":[],"is_error":true,"error_code":"canceled","x":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast ToolCallAck
		if !fast.decodeFast(data) {
			return
		}
		var slow ToolCallAck
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v\nslow %+v\ninput %q", fast, slow, data)
		}
		b, ok := fast.appendJSON(nil)
		if !ok {
			return
		}
		var back ToolCallAck
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, fast) {
			t.Fatalf("re-encoded %q: %v", b, err)
		}
	})
}

func FuzzFastString(f *testing.F) {
	f.Add("plain", []byte(`"plain"`))
	f.Add("tab\there \"q\" \\ \x00 é", []byte(`"\u00e9\n\/"`))
	f.Fuzz(func(t *testing.T, s string, quoted []byte) {
		if b, ok := appendString(nil, s); ok {
			var back string
			if err := json.Unmarshal(b, &back); err != nil || back != s {
				t.Fatalf("appendString(%q) = %s (%v)", s, b, err)
			}
		}
		sc := jsonScan{b: quoted}
		if got, ok := sc.text(); ok && sc.atEnd() {
			var want string
			if err := json.Unmarshal(quoted, &want); err != nil || got != want {
				t.Fatalf("text(%q) = %q, encoding/json %q (%v)", quoted, got, want, err)
			}
		}
	})
}
