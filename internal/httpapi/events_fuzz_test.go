package httpapi

import (
	"encoding/json"
	"errors"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

// FuzzDecodeEventParam checks that any input either decodes into a valid
// client event or is refused with a 400 envelope error, never a panic.
func FuzzDecodeEventParam(f *testing.F) {
	for _, s := range []string{
		`{"type":"user.message","content":[{"type":"text","text":"hi"}]}`,
		`{"type":"user.message","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}`,
		`{"type":"user.interrupt"}`,
		`{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"deny","deny_message":"no"}`,
		`{"type":"user.custom_tool_result","custom_tool_use_id":"sevt_1","content":[{"type":"text","text":"ok"}],"is_error":true}`,
		`{"type":"system.message","content":[{"type":"text","text":"be brief"}]}`,
		`{"type":"user.define_outcome","description":"x"}`,
		`{"type":5}`, `[]`, `null`, `{"type":"user.message","content":"hi"}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := decodeEventParam("events[0]", data)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 || ae.typ != ma.ErrInvalidRequest || ae.message == "" {
				t.Fatalf("error %v (%T) is not a 400 envelope error", err, err)
			}
			return
		}
		switch ev.Type {
		case ma.EventUserMessage, ma.EventUserInterrupt, ma.EventUserToolConfirmation, ma.EventUserCustomToolResult, ma.EventSystemMessage:
		default:
			t.Fatalf("accepted event type %q", ev.Type)
		}
		if ev.Type == ma.EventUserMessage && len(ev.Content) == 0 {
			t.Fatal("accepted a user.message without content")
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("accepted event does not marshal: %v", err)
		}
	})
}
