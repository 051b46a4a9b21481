package executorhub

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// outboxState returns how many results the client keeps and how many of
// them went out in a tool.call acknowledgement.
func outboxState(c *executor.Client) (kept, inAck int) { return c.Unacknowledged() }

// maxUnproven is how many results may wait for their proof of receipt.
const maxUnproven = executor.MaxUnprovenResults

// warmUp makes a first call and waits until its result is acknowledged.
func warmUp(t *testing.T, c *executor.Client, l *Lease) {
	t.Helper()
	if _, err := l.CallTool(context.Background(), tool.Call{ID: "c0", Name: "noop"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(11 * time.Second) // a heartbeat
	synctest.Wait()
	if kept, _ := outboxState(c); kept != 0 {
		t.Fatalf("warm-up result still kept")
	}
}

func TestFastResultTravelsInAckAndIsProvenByHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{HeartbeatInterval: 10 * time.Second, LeaseTTL: 30 * time.Second})
		ts := &testSessions{}
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		defer f.shutdown(c)
		l := f.assign("s1", "noop")
		// The first call may race the executor's reading of its
		// registration answer (which lists the feature): warm up.
		warmUp(t, c, l)
		res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"})
		if err != nil || res.Content[0].Text != "ok noop" {
			t.Fatalf("CallTool = %+v, %v", res, err)
		}
		synctest.Wait()
		if kept, inAck := outboxState(c); kept != 1 || inAck != 1 {
			t.Fatalf("outbox kept %d (%d sent in the ack), want the result kept until a heartbeat proves it arrived", kept, inAck)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if kept, _ := outboxState(c); kept != 0 {
			t.Fatalf("outbox still keeps %d results after a heartbeat", kept)
		}
	})
}

func TestSlowResultComesAsToolResultAfterAPlainAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{})
		ts := &testSessions{gate: make(chan struct{})}
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		defer f.shutdown(c)
		l := f.assign("s1", "block")
		type answer struct {
			res tool.Result
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
			done <- answer{res, err}
		}()
		time.Sleep(time.Second) // well past the acknowledgement window
		synctest.Wait()
		select {
		case a := <-done:
			t.Fatalf("CallTool returned before the tool finished: %+v", a)
		default:
		}
		close(ts.gate)
		a := <-done
		if a.err != nil || a.res.Content[0].Text != "ok block" {
			t.Fatalf("CallTool = %+v, %v", a.res, a.err)
		}
		synctest.Wait()
		if kept, _ := outboxState(c); kept != 0 {
			t.Fatalf("outbox keeps %d results: the tool.result was not acknowledged", kept)
		}
	})
}

func TestResultSentInAckIsResentAfterReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{HeartbeatInterval: 10 * time.Second, LeaseTTL: 30 * time.Second})
		ts := &testSessions{}
		var registered int
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps, OnEvent: func(e executor.Event) {
			if e.Type == executor.EventRegistered {
				registered++
			}
		}})
		defer f.shutdown(c)
		l := f.assign("s1", "noop")
		warmUp(t, c, l)
		if _, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, inAck := outboxState(c); inAck != 1 {
			t.Fatalf("%d results sent in acknowledgements, want 1", inAck)
		}
		// The socket drops before any heartbeat could prove the result
		// arrived: after re-registering the executor sends it again as
		// tool.result, which the hub answers as a duplicate.
		f.net.drop()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if registered < 2 {
			t.Fatalf("registered %d times, want a reconnect", registered)
		}
		if kept, _ := outboxState(c); kept != 0 {
			t.Fatalf("outbox keeps %d results after the resend", kept)
		}
		res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"})
		if err != nil || res.Content[0].Text != "ok noop" {
			t.Fatalf("CallTool again = %+v, %v", res, err)
		}
		if n := ts.runs.Load(); n != 2 { // c0 and c1
			t.Fatalf("the tool ran %d times, want once per call", n)
		}
	})
}

func TestUnprovenResultsAskForAnEarlyHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFixture(t, HubOptions{HeartbeatInterval: time.Hour, LeaseTTL: 3 * time.Hour})
		ts := &testSessions{}
		c := f.client(executor.Options{Sessions: ts, Capabilities: testCaps})
		defer f.shutdown(c)
		l := f.assign("s1", "noop")
		most := 0
		for i := range 3 * maxUnproven {
			if _, err := l.CallTool(context.Background(), tool.Call{ID: "c" + strconv.Itoa(i), Name: "noop"}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			kept, _ := outboxState(c)
			most = max(most, kept)
		}
		if most > maxUnproven {
			t.Fatalf("the outbox grew to %d results, want at most %d between heartbeats", most, maxUnproven)
		}
	})
}
