package executorhub

import (
	"encoding/json"
	"testing"

	"github.com/reinsdev/reins/executor"
)

// TestHeartbeatDuringAssignmentIsNotLost: a heartbeat that names a session
// whose assignment the executor accepted, but whose answer the hub has not
// read yet, does not report the lease lost (the executor would drop the
// session and fail its first call with session_not_active).
func TestHeartbeatDuringAssignmentIsNotLost(t *testing.T) {
	h := NewHub(HubOptions{Credentials: &memCredentials{}})
	c := &hubConn{h: h, leases: map[string]*Lease{}}
	c.leases["sesn_1"] = &Lease{SessionID: "sesn_1", LeaseID: "lease_1", h: h, state: leaseAssigning}
	params, _ := json.Marshal(executor.HeartbeatParams{Sessions: []executor.SessionLease{{SessionID: "sesn_1", LeaseID: "lease_1"}}})
	res, err := c.heartbeat(params)
	if err != nil {
		t.Fatal(err)
	}
	if lost := res.(executor.HeartbeatResult).Lost; len(lost) != 0 {
		t.Fatalf("a lease being assigned was reported lost: %+v", lost)
	}
	params, _ = json.Marshal(executor.HeartbeatParams{Sessions: []executor.SessionLease{{SessionID: "sesn_1", LeaseID: "lease_0"}}})
	if res, _ := c.heartbeat(params); len(res.(executor.HeartbeatResult).Lost) != 1 {
		t.Fatal("an old lease of the session was not reported lost")
	}
}
