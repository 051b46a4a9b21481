package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	ma "github.com/reinsdev/reins/managedagents"
)

const (
	// burstSessions are created at once, and run a turn each.
	burstSessions = 100
	// burstPolls is how many times a client lists a session's events,
	// back to back, from the start of the burst: three times what the
	// per-key limit of the hosted API lets through at once.
	burstPolls = 300
	// burstStreams are opened on one key at once.
	burstStreams = 1000
	// burstKey is the bootstrap key of the children of these tests.
	burstKey = "sk-burst-test-key-0123456789abcdef"
)

// defaultsChild is a reins serve started with its defaults, and an SDK
// client of it with the SDK's defaults (retries on).
type defaultsChild struct {
	*child
	client anthropic.Client
	hc     *http.Client
}

// startDefaults starts reins serve with nothing but an address, a data
// dir and a bootstrap key.
func startDefaults(t *testing.T) *defaultsChild {
	t.Helper()
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, bin, t.TempDir(), freeAddr(t), burstKey)
	t.Cleanup(func() { stopChild(t, c) })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = burstSessions
	return newDefaultsChild(t, c, &http.Client{Transport: tr})
}

// newDefaultsChild returns c with an SDK client of it on hc, with the
// SDK's defaults otherwise.
func newDefaultsChild(t *testing.T, c *child, hc *http.Client) *defaultsChild {
	t.Cleanup(hc.CloseIdleConnections)
	return &defaultsChild{child: c, hc: hc, client: anthropic.NewClient(option.WithBaseURL(c.url), option.WithAPIKey(burstKey), option.WithHTTPClient(hc))}
}

// agentAndEnvironment creates a scripted agent and a cloud environment.
func (c *defaultsChild) agentAndEnvironment(t *testing.T) (agentID, envID string) {
	t.Helper()
	ctx := context.Background()
	a, err := c.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "burst", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "burst"})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID, e.ID
}

// newSession creates a session of the agent in the environment.
func (c *defaultsChild) newSession(ctx context.Context, agentID, envID string) (*anthropic.BetaManagedAgentsSession, error) {
	return c.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}, EnvironmentID: envID})
}

// TestDefaultsTakeABurst: on the defaults of `reins serve`, one user's
// burst through the official Go SDK with its default retries (100
// sessions created at once, a turn run on each, and a client listing a
// session's events as fast as it can meanwhile) gets no error at all:
// there are no per-key rate limits unless an operator sets them.
func TestDefaultsTakeABurst(t *testing.T) {
	c := startDefaults(t)
	agentID, envID := c.agentAndEnvironment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first, err := c.newSession(ctx, agentID, envID)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan map[int]int, 1)
	go func() { polled <- c.poll(first.ID) }()

	errs := make([]error, burstSessions)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range burstSessions {
		wg.Go(func() {
			<-ready
			errs[i] = c.turn(ctx, agentID, envID, i)
		})
	}
	began := time.Now()
	close(ready)
	wg.Wait()
	took := time.Since(began)
	statuses := <-polled

	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed++; failed <= 10 {
				t.Errorf("session %d: %v", i, err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d sessions failed", failed, burstSessions)
	}
	if len(statuses) != 1 || statuses[http.StatusOK] != burstPolls {
		t.Errorf("listing a session's events back to back: statuses %v, want only 200", statuses)
	}
	t.Logf("%d sessions created and a turn run on each at once in %s; %d event lists back to back: %v",
		burstSessions, took.Round(time.Millisecond), burstPolls, statuses)
}

// turn creates a session, sends it a message and waits on its stream for
// the agent's answer and the end of the turn.
func (c *defaultsChild) turn(ctx context.Context, agentID, envID string, i int) error {
	sess, err := c.newSession(ctx, agentID, envID)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	st := c.client.Beta.Sessions.Events.StreamEvents(ctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
	defer st.Close()
	if err := st.Err(); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	msg := fmt.Sprintf("burst %d", i)
	if _, err := c.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(msg)}}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	answer := ""
	for st.Next() {
		var ev ma.Event
		if err := json.Unmarshal([]byte(st.Current().RawJSON()), &ev); err != nil {
			return err
		}
		switch ev.Type {
		case ma.EventAgentMessage:
			answer = joinText(ev.Content)
		case ma.EventSessionError:
			return fmt.Errorf("session.error %+v", ev.Error)
		case ma.EventStatusIdle:
			if want := "You said: " + msg; answer != want {
				return fmt.Errorf("turn ended with answer %q, want %q", answer, want)
			}
			return nil
		}
	}
	return fmt.Errorf("stream ended before the turn did: %v", st.Err())
}

// poll lists the session's events burstPolls times, back to back, and
// counts the statuses (0: no answer).
func (c *defaultsChild) poll(sessionID string) map[int]int {
	statuses := map[int]int{}
	for range burstPolls {
		req, _ := http.NewRequest(http.MethodGet, c.url+"/v1/sessions/"+sessionID+"/events", nil)
		req.Header.Set("x-api-key", burstKey)
		resp, err := c.hc.Do(req)
		if err != nil {
			statuses[0]++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	return statuses
}

// TestDefaultsThousandStreams: on the defaults of `reins serve`, one key
// may hold 1,000 event streams of a session through the official Go
// SDK, and each gets the message sent to the session: none is refused or
// cut.
func TestDefaultsThousandStreams(t *testing.T) {
	c := startDefaults(t)
	agentID, envID := c.agentAndEnvironment(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := c.newSession(ctx, agentID, envID)
	if err != nil {
		t.Fatal(err)
	}
	var opened, got atomic.Int64
	errs := make(chan error, burstStreams)
	var open, wg sync.WaitGroup
	slots := make(chan struct{}, 50) // connections being opened at once
	for range burstStreams {
		open.Add(1)
		wg.Go(func() {
			slots <- struct{}{}
			st := c.client.Beta.Sessions.Events.StreamEvents(ctx, sess.ID, anthropic.BetaSessionEventStreamParams{})
			<-slots
			defer st.Close()
			err := st.Err()
			if err == nil {
				opened.Add(1)
			}
			open.Done()
			if err != nil {
				errs <- fmt.Errorf("open: %w", err)
				return
			}
			for st.Next() {
				if st.Current().Type == ma.EventUserMessage {
					got.Add(1)
					return
				}
			}
			errs <- fmt.Errorf("stream ended before the message: %v", st.Err())
		})
	}
	open.Wait()
	if _, err := c.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("to every stream")}}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if got.Load() != burstStreams {
		t.Errorf("%d of %d streams opened, %d got the message; want every one", opened.Load(), burstStreams, got.Load())
	}
}
