package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	ma "github.com/reinsdev/reins/managedagents"
)

// turnsPerSession is how many turns each session runs: text and bash
// turns alternating, starting with text.
const turnsPerSession = 5

// bashMessage asks the scripted model for one bash call, then the answer
// "done".
const bashMessage = `@tool bash {"command":"echo hi"}` + "\n@then done"

// world is what the clients share: the SDK client and what the setup
// created.
type world struct {
	api anthropic.Client
	// transport is the SDK's, for closing its idle connections.
	transport *http.Transport
	// agent has the built-in toolset and the scripted model.
	agent string
	// cloud and hosted are the environments; envKey is hosted's key,
	// for the executor.
	cloud, hosted, envKey string
}

// setUp creates the agent and the two environments through the SDK.
func setUp(ctx context.Context, srv *server, cfg config) (*world, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2*cfg.clients + 8
	// Every error counts: the SDK does not retry.
	w := &world{transport: tr, api: anthropic.NewClient(option.WithBaseURL(srv.url), option.WithAPIKey(srv.key), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}))}
	agent, err := w.api.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "soak",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{}}},
	})
	if err != nil {
		return nil, fmt.Errorf("create the agent: %w", err)
	}
	w.agent = agent.ID
	cloud, err := w.api.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "soak-cloud"})
	if err != nil {
		return nil, fmt.Errorf("create the cloud environment: %w", err)
	}
	w.cloud = cloud.ID
	if cfg.hosted == 0 {
		return w, nil
	}
	hosted, err := w.api.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "soak-hosted",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		return nil, fmt.Errorf("create the self-hosted environment: %w", err)
	}
	w.hosted = hosted.ID
	// Environment keys are a reins endpoint the SDK has no method for.
	var key struct{ Key string }
	if err := w.api.Post(ctx, "v1/environments/"+hosted.ID+"/keys", nil, &key); err != nil {
		return nil, fmt.Errorf("create the environment key: %w", err)
	}
	w.envKey = key.Key
	return w, nil
}

// traffic runs the clients until cfg.duration is over (each finishes the
// session it is in), ctx ends, or a child process exits.
func traffic(ctx context.Context, cfg config, w *world, rec *recorder, children ...*child) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, c := range children {
		go func() {
			select {
			case <-c.exited():
				rec.fail(c.unexpected())
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	until := time.Now().Add(cfg.duration)
	var wg sync.WaitGroup
	for i := range cfg.clients {
		c := &client{id: i, world: w, rec: rec, timeout: cfg.turnTimeout, think: cfg.think, env: w.cloud, where: "cloud"}
		if i < cfg.hosted {
			c.env, c.where = w.hosted, "self-hosted"
		}
		wg.Go(func() { c.run(ctx, until) })
	}
	wg.Wait()
}

// warm runs one session in each environment, one after the other, and
// fails if any of it failed.
func warm(ctx context.Context, cfg config, w *world, log *slog.Logger) error {
	rec := newRecorder(log)
	c := &client{id: -1, world: w, rec: rec, timeout: cfg.turnTimeout, env: w.cloud, where: "cloud"}
	c.session(ctx)
	if w.hosted != "" {
		c.env, c.where = w.hosted, "self-hosted"
		c.session(ctx)
	}
	if _, fails, reasons := rec.totals(); fails > 0 {
		return fmt.Errorf("the warm-up sessions failed: %s", strings.Join(reasons, "; "))
	}
	return ctx.Err()
}

// client runs sessions one after another in one environment.
type client struct {
	id int
	*world
	rec     *recorder
	timeout time.Duration
	think   time.Duration // pause after each turn, as a reader would
	env     string
	where   string
}

// run runs sessions until the time is over or ctx ends.
func (c *client) run(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil {
		if !c.session(ctx) {
			// Do not spin on a server that fails everything.
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

// session creates a session, runs its turns on its event stream and
// deletes it. It reports whether all went well.
func (c *client) session(ctx context.Context) bool {
	sess, err := c.api.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(c.agent)},
		EnvironmentID: c.env,
	})
	if err != nil {
		return c.fail(ctx, "", "create session", err)
	}
	ok := c.turns(ctx, sess.ID)
	// Deleting is part of the traffic, even on the way out.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	if _, err := c.api.Beta.Sessions.Delete(dctx, sess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		return c.fail(ctx, sess.ID, "delete session", err)
	}
	return ok
}

// turns opens the session's event stream and runs its turns; it stops at
// the first failure.
func (c *client) turns(ctx context.Context, sessionID string) bool {
	evs, err := openEvents(ctx, c.api, sessionID)
	if err != nil {
		return c.fail(ctx, sessionID, "open the event stream", err)
	}
	defer evs.close()
	for n := range turnsPerSession {
		kind, msg := "text", fmt.Sprintf("hello %d from client %d", n+1, c.id)
		want := "You said: " + msg
		if n%2 == 1 {
			kind, msg, want = "bash", bashMessage, "done"
		}
		took, err := c.turn(ctx, sessionID, evs, msg, &transcript{bash: kind == "bash", want: want})
		if err != nil {
			return c.fail(ctx, sessionID, fmt.Sprintf("turn %d (%s)", n+1, kind), err)
		}
		if n == 1 {
			kind = "bash 1st" // the session's first tool: its sandbox starts
		}
		c.rec.turn(c.where+" "+kind, took)
		select {
		case <-time.After(c.think):
		case <-ctx.Done():
			return true
		}
	}
	return true
}

// fail records a failure unless ctx ended (the soak is being stopped).
// It returns false, for the caller to return.
func (c *client) fail(ctx context.Context, sessionID, what string, err error) bool {
	if ctx.Err() == nil {
		c.rec.fail(fmt.Sprintf("client %d (%s) %s %s: %v", c.id, c.where, sessionID, what, err))
	}
	return false
}

// turn sends msg and reads the stream until the session is idle again. It
// returns the time from the send to session.status_idle.
func (c *client) turn(ctx context.Context, sessionID string, evs *events, msg string, tr *transcript) (time.Duration, error) {
	start := time.Now()
	_, err := c.api.Beta.Sessions.Events.Send(ctx, sessionID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: msg}}},
		}}},
	})
	if err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	timeout := time.NewTimer(c.timeout)
	defer timeout.Stop()
	for {
		select {
		case ev, ok := <-evs.ch:
			if !ok {
				return 0, fmt.Errorf("the event stream ended (%v) after %v", evs.err, tr.types)
			}
			if done, err := tr.see(ev); done {
				return time.Since(start), err
			}
		case <-timeout.C:
			return 0, fmt.Errorf("not idle %s after the send; events so far %v", c.timeout, tr.types)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// transcript checks one turn's events as they arrive.
type transcript struct {
	bash bool
	// want is the agent.message the turn must end with.
	want    string
	types   []string
	answer  string
	results []string
}

// see takes the next event; done is true once the turn is over, err says
// what went wrong with it.
func (t *transcript) see(ev ma.Event) (done bool, err error) {
	t.types = append(t.types, ev.Type)
	switch ev.Type {
	case ma.EventSessionError:
		return true, fmt.Errorf("session.error: %+v", ev.Error)
	case ma.EventAgentToolResult:
		if ev.IsError != nil && *ev.IsError {
			return true, fmt.Errorf("tool result is_error: %q", text(ev.Content))
		}
		t.results = append(t.results, text(ev.Content))
	case ma.EventAgentMessage:
		t.answer = text(ev.Content)
	case ma.EventStatusTerminated, ma.EventSessionDeleted:
		return true, fmt.Errorf("%s during the turn", ev.Type)
	case ma.EventStatusIdle:
		return true, t.check(ev.StopReason)
	}
	return false, nil
}

// check judges the turn once the session is idle.
func (t *transcript) check(stop *ma.StopReason) error {
	switch {
	case stop == nil || stop.Type != ma.StopEndTurn:
		return fmt.Errorf("idle with stop_reason %+v after %v", stop, t.types)
	case t.answer != t.want:
		return fmt.Errorf("answer %q, want %q", t.answer, t.want)
	case t.bash && (len(t.results) != 1 || strings.TrimSpace(t.results[0]) != "hi"):
		return fmt.Errorf("bash results %q, want one \"hi\"", t.results)
	}
	return nil
}

// text joins the text of content blocks.
func text(blocks []ma.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		b.WriteString(c.Text)
	}
	return b.String()
}

// events is a session's open event stream, decoded.
type events struct {
	cancel context.CancelFunc
	ch     chan ma.Event
	// err is why the stream ended, once ch is closed.
	err error
}

// openEvents opens the session's event stream. When it returns, the
// server has registered the stream: every event from then on arrives.
func openEvents(ctx context.Context, api anthropic.Client, sessionID string) (*events, error) {
	ctx, cancel := context.WithCancel(ctx)
	st := api.Beta.Sessions.Events.StreamEvents(ctx, sessionID, anthropic.BetaSessionEventStreamParams{})
	if err := st.Err(); err != nil {
		st.Close()
		cancel()
		return nil, err
	}
	e := &events{cancel: cancel, ch: make(chan ma.Event, 64)}
	go e.read(ctx, st)
	return e, nil
}

// read decodes the stream's events into e.ch until it ends.
func (e *events) read(ctx context.Context, st *ssestream.Stream[anthropic.BetaManagedAgentsStreamSessionEventsUnion]) {
	defer close(e.ch)
	defer st.Close()
	for st.Next() {
		var ev ma.Event
		if err := json.Unmarshal([]byte(st.Current().RawJSON()), &ev); err != nil {
			e.err = err
			return
		}
		select {
		case e.ch <- ev:
		case <-ctx.Done():
			e.err = ctx.Err()
			return
		}
	}
	e.err = st.Err()
	if e.err == nil {
		e.err = errors.New("closed by the server")
	}
}

// close ends the stream and waits for its reader.
func (e *events) close() {
	e.cancel()
	for range e.ch {
	}
}
