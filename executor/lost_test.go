package executor

import (
	"context"
	"encoding/json"
	"testing"
)

// closeCounter is a Session that counts its closes.
type closeCounter struct{ closed int }

func (s *closeCounter) CallTool(context.Context, string, json.RawMessage) ToolResult {
	return ToolResult{}
}
func (s *closeCounter) Close() error { s.closed++; return nil }

// TestLostReportSparesANewLease: a heartbeat's "lost" answer about the
// lease it was sent with does not end the session when the harness has
// assigned it again, under a new lease, meanwhile (an idle session's slot
// taken back and given again).
func TestLostReportSparesANewLease(t *testing.T) {
	c := &Client{sessions: map[string]*clientSession{}, outbox: map[string]*outboxEntry{}}
	sess := &closeCounter{}
	c.sessions["sesn_1"] = &clientSession{a: Assignment{SessionID: "sesn_1", LeaseID: "lease_2"}, sess: sess}
	lost := []LostSession{{SessionID: "sesn_1", Reason: ReleaseLeaseExpired}}

	c.mu.Lock()
	c.dropLostLocked(lost, []SessionLease{{SessionID: "sesn_1", LeaseID: "lease_1"}})
	c.mu.Unlock()
	if c.sessions["sesn_1"] == nil {
		t.Fatal("the report about lease_1 ended the session held under lease_2")
	}

	c.mu.Lock()
	c.dropLostLocked(lost, []SessionLease{{SessionID: "sesn_1", LeaseID: "lease_2"}})
	c.mu.Unlock()
	c.wg.Wait()
	if c.sessions["sesn_1"] != nil || sess.closed != 1 {
		t.Fatalf("the report about the current lease did not end the session (closed %d)", sess.closed)
	}
}
