package executor

import (
	"encoding/json"
	"testing"
)

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{}}`,
		`{"jsonrpc":"2.0","method":"tool.cancel","params":{"session_id":"s"}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"accepted":true}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32006,"message":"payload_too_large"}}`,
		`[{"jsonrpc":"2.0"}]`, `not json`, `{"id":{"x":1}}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, id, rerr := decodeFrame(data)
		if rerr != nil {
			if m != nil {
				t.Fatal("message and error")
			}
			if rerr.Message != CodeMessage(rerr.Code) {
				t.Fatalf("code %d with message %q", rerr.Code, rerr.Message)
			}
			if id != nil && !json.Valid(id) {
				t.Fatalf("reply id %q is not JSON", id)
			}
			return
		}
		if m.isRequest() == m.isNotification() && m.Method != "" {
			t.Fatal("a request and a notification")
		}
		if m.Method == "" && m.ID == nil {
			t.Fatal("a response without id")
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		idOf(data)
	})
}
