package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/app"
	ma "github.com/reinsdev/reins/managedagents"
)

const (
	// overloadSessions send a message at the same moment.
	overloadSessions = 1000
	// overloadBashEvery: every so many sessions' turn runs bash in its
	// sandbox instead of a text answer.
	overloadBashEvery = 50
	// overloadHeapBound is the most the heap in use of the test process
	// (the server and its thousand clients) may grow during the burst.
	// It peaks at about 80 MiB (with -race too), growing with the number
	// of sends in flight: the largest part is the HTTP connections'
	// buffers at both ends (some 17 and 15 MiB live), the queued turns'
	// state a few MiB. A server that held many times that per turn would
	// pass the bound.
	overloadHeapBound = 256 << 20
	// overloadProbeTimeout is how long a GET may take during the burst
	// (up to 6 s with -race on the loaded development machine).
	overloadProbeTimeout = 20 * time.Second
	// overloadRetries is how often a refused client tries again (the
	// SDK waits out each retry-after of a second): a burst that drains
	// in over a minute under -race on a loaded machine ends before.
	overloadRetries = 120
	// overloadMaxRequests bounds the requests the server handles at once.
	overloadMaxRequests = 32
	// overloadDrain is how long the accepted turns may take to finish.
	overloadDrain = 3 * time.Minute
)

// TestOverload: with far more work than the machine can take at once (a
// thousand sessions sending a message at the same moment, over as many
// connections), reins queues the turns and runs them all: a send is either
// accepted or refused with 429 or 503 and a retry-after header, every
// accepted turn ends idle with the agent's answer and no session.error,
// the server answers other requests meanwhile, and the heap stays under a
// bound.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("a thousand sessions at once")
	}
	// The model concurrency of `reins serve` by default, and a bound on
	// requests at once far under the burst, so that some sends are shed.
	s := startWith(t, options{}, func(c *app.Config) {
		c.ModelConcurrency = 64
		c.HTTP.MaxRequests = overloadMaxRequests
	})
	tr := &http.Transport{MaxIdleConnsPerHost: overloadSessions, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: overloadDrain}

	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	begin := time.Now()
	ids := s.createSessions(t, hc, a.ID, env.ID, overloadSessions)
	t.Logf("%d sessions created in %s", len(ids), time.Since(begin).Round(time.Millisecond))

	mon := monitor(t, s, hc, ids[0])
	begin = time.Now()
	outs := burst(s, hc, ids)
	sent := time.Since(begin)
	accepted, refused := 0, 0
	for i, o := range outs {
		switch {
		case o.err != nil:
			t.Errorf("send to session %d: %v", i, o.err)
		case o.status == http.StatusOK:
			accepted++
		case o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable:
			refused++
			if n, err := strconv.Atoi(o.retryAfter); err != nil || n < 1 {
				t.Errorf("send to session %d: %d with retry-after %q, want a number of seconds", i, o.status, o.retryAfter)
			}
		default:
			t.Errorf("send to session %d: %d %s", i, o.status, o.body)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Errorf("%d sends over a bound of %d requests at once: %d accepted, %d refused; want some of each", len(ids), overloadMaxRequests, accepted, refused)
	}
	// The refused clients send again the way the SDK does, waiting out
	// retry-after: then every turn is accepted and must run.
	resent := resend(s, hc, ids, outs)
	s.waitDrained(t, overloadDrain)
	drained := time.Since(begin)
	m := mon.stop()

	t.Logf("%d sends at once: %d accepted, %d refused with 429/503, all answered in %s", len(ids), accepted, refused, sent.Round(time.Millisecond))
	t.Logf("the %d refused sent again with the SDK's retries: %d accepted", refused, resent)
	t.Logf("accepted turns drained in %s: %.0f turns/s", drained.Round(time.Millisecond), float64(accepted+resent)/drained.Seconds())
	t.Logf("peak heap in use %.1f MiB (bound %d MiB, %.1f MiB before the burst); probe GET during the burst: %d, slowest %s",
		float64(m.peakHeap)/(1<<20), overloadHeapBound>>20, float64(m.startHeap)/(1<<20), m.probes, m.slowest.Round(time.Millisecond))
	if grew := m.peakHeap - min(m.startHeap, m.peakHeap); grew > overloadHeapBound {
		t.Errorf("heap in use grew by %.1f MiB during the burst, over the bound of %d MiB", float64(grew)/(1<<20), overloadHeapBound>>20)
	}
	for _, err := range m.probeErrs {
		t.Errorf("the server did not answer a GET during the burst: %v", err)
	}
	s.checkTurns(t, ids, outs)
}

// overloadMessage is the message session i sends and the answer its turn
// must end with.
func overloadMessage(i int) (msg, answer string) {
	if i%overloadBashEvery == 0 {
		return fmt.Sprintf(`@tool bash {"command":"echo overload %d"}`+"\n@then done %d", i, i), fmt.Sprintf("done %d", i)
	}
	msg = fmt.Sprintf("overload %d", i)
	return msg, "You said: " + msg
}

// createSessions creates n sessions, 32 at a time.
func (s *server) createSessions(t *testing.T, hc *http.Client, agentID, envID string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
					Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
					EnvironmentID: envID,
				}, option.WithHTTPClient(hc))
				if err != nil {
					errs[i] = err
					continue
				}
				ids[i] = sess.ID
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("create session: %v", err)
		}
	}
	return ids
}

// sendOutcome is how the server answered one send.
type sendOutcome struct {
	status     int
	retryAfter string
	body       string
	err        error
}

// burst sends each session its message, all at the same moment, each on
// its own connection, and returns the answers.
func burst(s *server, hc *http.Client, ids []string) []sendOutcome {
	outs := make([]sendOutcome, len(ids))
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		msg, _ := overloadMessage(i)
		body, _ := json.Marshal(map[string]any{"events": []any{map[string]any{
			"type": "user.message", "content": []any{map[string]any{"type": "text", "text": msg}}}}})
		wg.Go(func() {
			<-ready
			outs[i] = s.post(hc, "/v1/sessions/"+id+"/events", body)
		})
	}
	close(ready)
	wg.Wait()
	return outs
}

// resend sends again, with the SDK and its retries, the messages that
// were refused, marking those accepted; it returns how many were.
func resend(s *server, hc *http.Client, ids []string, outs []sendOutcome) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i, id := range ids {
		if outs[i].status == http.StatusOK || outs[i].err != nil {
			continue
		}
		msg, _ := overloadMessage(i)
		wg.Go(func() {
			_, err := s.client.Beta.Sessions.Events.Send(context.Background(), id, anthropic.BetaSessionEventSendParams{
				Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(msg)}}, option.WithHTTPClient(hc), option.WithMaxRetries(overloadRetries))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				outs[i].err = fmt.Errorf("sent again with retries: %w", err)
				return
			}
			outs[i].status = http.StatusOK
			n++
		})
	}
	wg.Wait()
	return n
}

// post sends one request with the API key.
func (s *server) post(hc *http.Client, path string, body []byte) sendOutcome {
	req, err := http.NewRequest("POST", s.url+path, bytes.NewReader(body))
	if err != nil {
		return sendOutcome{err: err}
	}
	req.Header.Set("x-api-key", s.key)
	req.Header.Set("content-type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return sendOutcome{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return sendOutcome{status: resp.StatusCode, retryAfter: resp.Header.Get("retry-after"), body: string(b), err: err}
}

// waitDrained waits until no session is running or rescheduling and none
// has queued input.
func (s *server) waitDrained(t *testing.T, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		active, err := s.app.Store.SessionIDsByStatus(ctx, ma.StatusRunning, ma.StatusRescheduling)
		if err != nil {
			t.Fatal(err)
		}
		pending, err := s.app.Store.SessionIDsWithPending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(active) == 0 && len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d sessions still running or rescheduling and %d with queued input (e.g. %v %v)",
				timeout, len(active), len(pending), active[:min(3, len(active))], pending[:min(3, len(pending))])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkTurns lists each session's events, 16 sessions at a time: an
// accepted turn ended idle (end_turn) with its answer and no
// session.error; a refused send left nothing in the log.
func (s *server) checkTurns(t *testing.T, ids []string, outs []sendOutcome) {
	t.Helper()
	problems := make([]string, len(ids))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				problems[i] = s.checkTurn(ids[i], i, outs[i].status == http.StatusOK)
			}
		})
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	bad := 0
	for i, p := range problems {
		if p == "" {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("session %d (%s): %s", i, ids[i], p)
		}
	}
	if bad > 10 {
		t.Errorf("… and %d more sessions", bad-10)
	}
}

// checkTurn checks session i's log; it returns what is wrong with it, or
// "".
func (s *server) checkTurn(id string, i int, accepted bool) string {
	page, err := s.client.Beta.Sessions.Events.List(context.Background(), id, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		return err.Error()
	}
	var evs []ma.Event
	for _, e := range page.Data {
		var ev ma.Event
		if err := json.Unmarshal([]byte(e.RawJSON()), &ev); err != nil {
			return err.Error()
		}
		evs = append(evs, ev)
	}
	kinds := make([]string, len(evs))
	var answer, results string
	for j, ev := range evs {
		kinds[j] = ev.Type
		switch ev.Type {
		case ma.EventSessionError:
			return fmt.Sprintf("session.error %+v", ev.Error)
		case ma.EventAgentToolResult:
			if ev.IsError != nil && *ev.IsError {
				return fmt.Sprintf("tool result is_error: %+v", ev.Content)
			}
			results += joinText(ev.Content)
		case ma.EventAgentMessage:
			answer = joinText(ev.Content)
		}
	}
	if !accepted {
		if len(evs) > 0 {
			return fmt.Sprintf("its send was refused, yet it has events %v", kinds)
		}
		return ""
	}
	if len(evs) == 0 {
		return "its send was accepted, yet it has no events"
	}
	_, want := overloadMessage(i)
	last := evs[len(evs)-1]
	switch {
	case last.Type != ma.EventStatusIdle || last.StopReason == nil || last.StopReason.Type != ma.StopEndTurn:
		return fmt.Sprintf("the log does not end idle with end_turn: %v", kinds)
	case answer != want:
		return fmt.Sprintf("answer %q, want %q (%v)", answer, want, kinds)
	case i%overloadBashEvery == 0 && !strings.Contains(results, fmt.Sprintf("overload %d", i)):
		return fmt.Sprintf("bash result %q", results)
	}
	return ""
}

// joinText joins the text of content blocks.
func joinText(blocks []ma.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// overloadMonitor samples the heap and probes the server while the burst
// runs.
type overloadMonitor struct {
	stopc chan struct{}
	done  chan struct{}
	m     monitored
}

// monitored is what the monitor saw.
type monitored struct {
	startHeap, peakHeap uint64
	probes              int
	slowest             time.Duration
	probeErrs           []error
}

// monitor starts sampling the heap every 20 ms and getting a session
// every 100 ms.
func monitor(t *testing.T, s *server, hc *http.Client, sessionID string) *overloadMonitor {
	t.Helper()
	o := &overloadMonitor{stopc: make(chan struct{}), done: make(chan struct{})}
	runtime.GC() // what earlier tests left is not the burst's
	o.m.startHeap = heapInUse()
	go func() {
		defer close(o.done)
		heapTick := time.NewTicker(20 * time.Millisecond)
		defer heapTick.Stop()
		probeTick := time.NewTicker(100 * time.Millisecond)
		defer probeTick.Stop()
		for {
			select {
			case <-o.stopc:
				return
			case <-heapTick.C:
				o.m.peakHeap = max(o.m.peakHeap, heapInUse())
			case <-probeTick.C:
				o.probe(s, hc, sessionID)
			}
		}
	}()
	return o
}

// probe gets the session as a client that is not part of the burst would.
func (o *overloadMonitor) probe(s *server, hc *http.Client, sessionID string) {
	o.m.probes++
	begin := time.Now()
	// With the SDK's retries, which wait out a 503's retry-after.
	_, err := s.client.Beta.Sessions.Get(context.Background(), sessionID, anthropic.BetaSessionGetParams{}, option.WithHTTPClient(hc),
		option.WithRequestTimeout(overloadProbeTimeout), option.WithMaxRetries(overloadRetries))
	o.m.slowest = max(o.m.slowest, time.Since(begin))
	if err != nil && len(o.m.probeErrs) < 5 {
		o.m.probeErrs = append(o.m.probeErrs, err)
	}
}

// stop ends the monitor and returns what it saw.
func (o *overloadMonitor) stop() monitored {
	close(o.stopc)
	<-o.done
	o.m.peakHeap = max(o.m.peakHeap, heapInUse())
	return o.m
}

// heapInUse is the bytes in in-use heap spans (runtime.MemStats.HeapInuse),
// read without stopping the world.
func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}
