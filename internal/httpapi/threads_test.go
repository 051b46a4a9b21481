package httpapi

import (
	"strings"
	"testing"
)

// TestSessionThreadIDOnlyOnInterrupt: a client names a thread on a
// user.interrupt only; anywhere else session_thread_id is refused by name
// rather than stored (the server routes the other events itself).
func TestSessionThreadIDOnlyOnInterrupt(t *testing.T) {
	ev, err := decodeEventParam("events[0]", []byte(`{"type":"user.interrupt","session_thread_id":"sthr_x"}`))
	if err != nil || ev.SessionThreadID != "sthr_x" {
		t.Fatalf("interrupt naming a thread: %+v, %v", ev, err)
	}
	for _, body := range []string{
		`{"type":"user.message","content":[{"type":"text","text":"hi"}],"session_thread_id":"sthr_x"}`,
		`{"type":"user.tool_confirmation","tool_use_id":"sevt_1","result":"allow","session_thread_id":"sthr_x"}`,
		`{"type":"user.custom_tool_result","custom_tool_use_id":"sevt_1","session_thread_id":"sthr_x"}`,
	} {
		_, err := decodeEventParam("events[0]", []byte(body))
		if err == nil || !strings.Contains(err.Error(), "events[0].session_thread_id: only a user.interrupt names a thread") {
			t.Errorf("%s: got %v, want a 400 naming session_thread_id", body, err)
		}
	}
}
