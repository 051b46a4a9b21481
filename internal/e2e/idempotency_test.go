package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// loseProxy forwards HTTP requests to a server and can lose answers: a
// request it is told to lose is forwarded and answered by the server
// whole, then the client's connection is closed without a byte of the
// answer, as a crash or a network cut after the server committed would.
type loseProxy struct {
	url    string
	target string
	mu     sync.Mutex
	lose   map[string]int // answers still to lose by "METHOD path"
	posts  int            // POSTs forwarded
}

func newLoseProxy(t *testing.T, target string) *loseProxy {
	t.Helper()
	p := &loseProxy{target: target, lose: map[string]int{}}
	tr := &http.Transport{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.forward(w, r, tr) }))
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	p.url = srv.URL
	return p
}

// loseNext makes the proxy lose the answers of the next n requests of
// method to path.
func (p *loseProxy) loseNext(method, path string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose[method+" "+path] = n
}

// forwarded returns the POSTs forwarded so far.
func (p *loseProxy) forwarded() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts
}

func (p *loseProxy) forward(w http.ResponseWriter, r *http.Request, tr http.RoundTripper) {
	body, _ := io.ReadAll(r.Body)
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	out.Header = r.Header.Clone()
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	p.mu.Lock()
	k := r.Method + " " + r.URL.Path
	lost := err != nil || p.lose[k] > 0
	if p.lose[k] > 0 {
		p.lose[k]--
	}
	if r.Method == http.MethodPost {
		p.posts++
	}
	p.mu.Unlock()
	if lost {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
		return
	}
	for name, vals := range resp.Header {
		w.Header()[name] = vals
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// withKey is the request option of an Idempotency-Key.
func withKey(key string) option.RequestOption { return option.WithHeader("Idempotency-Key", key) }

// TestIdempotencyKeyThroughLostAnswers: the official Go SDK retries a
// session create and an event send whose answer was lost after the
// server committed them (it does, by default, after a connection error);
// with an Idempotency-Key the retry gets the first outcome (the same
// session, the same events) and nothing is done twice: one session, one
// message, one turn. Without a key the same retry duplicates both, which
// is what the key is for.
func TestIdempotencyKeyThroughLostAnswers(t *testing.T) {
	s := start(t, options{})
	p := newLoseProxy(t, s.url)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	client := anthropic.NewClient(option.WithBaseURL(p.url), option.WithAPIKey(s.key), option.WithHTTPClient(hc)) // the SDK's retries
	ctx := context.Background()
	agent, env := s.newAgent(t, "scripted"), s.newEnv(t, "lost answers")
	params := anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID}

	p.loseNext("POST", "/v1/sessions", 1)
	before := p.forwarded()
	sess, err := client.Beta.Sessions.New(ctx, params, withKey("create-1"))
	if err != nil {
		t.Fatal(err)
	}
	if sent := p.forwarded() - before; sent != 2 {
		t.Fatalf("the create reached the server %d times, want 2 (the lost one and the SDK's retry)", sent)
	}
	if n := s.countSessions(t); n != 1 {
		t.Fatalf("%d sessions after a create retried with its key, want 1", n)
	}
	if got, err := s.app.Store.GetSession(ctx, sess.ID); err != nil || got.ID != sess.ID {
		t.Fatalf("the session the retry answered: %v", err)
	}

	path := "/v1/sessions/" + sess.ID + "/events"
	p.loseNext("POST", path, 1)
	res, err := client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("once")}}, withKey("send-1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 1 || res.Data[0].ID == "" {
		t.Fatalf("the send's answer: %s", res.RawJSON())
	}
	evs := waitAnswered(t, s.client, sess.ID, "once")
	if ids := said(evs, ma.EventUserMessage, "once"); len(ids) != 1 || ids[0] != res.Data[0].ID {
		t.Fatalf("after a send retried with its key: messages %v in the log, want one, %s", ids, res.Data[0].ID)
	}
	if answers := said(evs, ma.EventAgentMessage, "You said: once"); len(answers) != 1 {
		t.Fatalf("after a send retried with its key: %d answers, want 1", len(answers))
	}

	// The same retries without a key do both twice.
	p.loseNext("POST", "/v1/sessions", 1)
	if _, err := client.Beta.Sessions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	if n := s.countSessions(t); n != 3 {
		t.Fatalf("%d sessions after a create retried without a key, want 3 (a duplicate)", n)
	}
	p.loseNext("POST", path, 1)
	if _, err := client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("twice")}}); err != nil {
		t.Fatal(err)
	}
	if msgs := s.logged(t, sess.ID, ma.EventUserMessage, "twice"); len(msgs) != 2 {
		t.Fatalf("a send retried without a key appended %d messages, want 2 (a duplicate)", len(msgs))
	}
}

// TestIdempotencyKeyRules: a request repeated with its key (a send, a
// session, environment or agent create) gets the first answer byte for
// byte (marked Idempotent-Replayed) and changes nothing; the key with
// another body is a 422 idempotency_key_reused; keys are per API key;
// concurrent repeats make one change; a bad key is a 400.
func TestIdempotencyKeyRules(t *testing.T) {
	s := start(t, options{})
	sess := s.newSession(t, s.newAgent(t, "scripted").ID, s.newEnv(t, "rules").ID)
	path := "/v1/sessions/" + sess.ID + "/events"
	body := `{"events":[{"type":"user.message","content":[{"type":"text","text":"same"}]}]}`
	first := s.keyed(t, s.key, path, "k1", body)
	again := s.keyed(t, s.key, path, "k1", body)
	if first.status != http.StatusOK || again.status != http.StatusOK || again.body != first.body || again.replayed != "true" || first.replayed != "" {
		t.Fatalf("repeated send: %d %q then %d %q (replayed %q)", first.status, first.body, again.status, again.body, again.replayed)
	}
	created := s.keyed(t, s.key, "/v1/sessions", "c1", fmt.Sprintf(`{"agent":%q,"environment_id":%q}`, sess.Agent.ID, sess.EnvironmentID))
	if repeat := s.keyed(t, s.key, "/v1/sessions", "c1", fmt.Sprintf(`{"agent":%q,"environment_id":%q}`, sess.Agent.ID, sess.EnvironmentID)); repeat.body != created.body || created.status != http.StatusOK {
		t.Fatalf("repeated create: %d %q then %q", created.status, created.body, repeat.body)
	}

	for _, create := range []struct{ path, body string }{
		{"/v1/environments", `{"name":"kept"}`},
		{"/v1/agents", `{"name":"kept","model":"scripted"}`},
	} {
		first := s.keyed(t, s.key, create.path, "made-once"+create.path, create.body)
		again := s.keyed(t, s.key, create.path, "made-once"+create.path, create.body)
		if first.status != http.StatusOK || again.status != http.StatusOK || again.body != first.body || again.replayed != "true" {
			t.Fatalf("repeated create of %s: %d %s then %d %s", create.path, first.status, first.body, again.status, again.body)
		}
	}
	if agents, err := s.client.Beta.Agents.List(context.Background(), anthropic.BetaAgentListParams{}); err != nil || len(agents.Data) != 2 {
		t.Fatalf("agents after a repeated create: %d, %v; want 2 (the session's and one)", len(agents.Data), err)
	}

	reused := s.keyed(t, s.key, path, "k1", strings.Replace(body, "same", "other", 1))
	if reused.status != http.StatusUnprocessableEntity || !strings.Contains(reused.body, `"type":"`+ma.ErrInvalidRequest+`"`) || !strings.Contains(reused.body, "idempotency_key_reused") {
		t.Fatalf("the key with another body: %d %s", reused.status, reused.body)
	}
	if elsewhere := s.keyed(t, s.key, "/v1/sessions/"+sess.ID+"/events/x", "k1", body); elsewhere.status == http.StatusOK {
		t.Fatalf("the key on another path: %d %s", elsewhere.status, elsewhere.body)
	}
	other, _, err := httpapi.CreateKey(context.Background(), s.app.Store, "other")
	if err != nil {
		t.Fatal(err)
	}
	if theirs := s.keyed(t, other, path, "k1", body); theirs.status != http.StatusOK || theirs.body == first.body {
		t.Fatalf("the key of another API key: %d %s, want a send of its own", theirs.status, theirs.body)
	}

	var wg sync.WaitGroup
	answers := make([]keyedAnswer, 8)
	for i := range answers {
		wg.Go(func() { answers[i] = s.keyed(t, s.key, path, "k2", strings.Replace(body, "same", "racing", 1)) })
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusOK || a.body != answers[0].body {
			t.Fatalf("concurrent repeat %d: %d %s, want %s", i, a.status, a.body, answers[0].body)
		}
	}
	if ids := s.logged(t, sess.ID, ma.EventUserMessage, "racing"); len(ids) != 1 {
		t.Fatalf("8 concurrent sends with one key appended %d messages, want 1", len(ids))
	}
	for _, bad := range []string{"", strings.Repeat("k", 256)} {
		if a := s.keyed(t, s.key, path, bad, body); a.status != http.StatusBadRequest {
			t.Fatalf("Idempotency-Key %.10q…: %d %s, want 400", bad, a.status, a.body)
		}
	}
}

// keyedAnswer is the answer of a request with an Idempotency-Key.
type keyedAnswer struct {
	status   int
	body     string
	replayed string
}

// keyed posts body to path with the API key apiKey and the
// Idempotency-Key key.
func (s *server) keyed(t *testing.T, apiKey, path, key, body string) keyedAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
	req.Header.Set("x-api-key", apiKey)
	req.Header.Set("content-type", "application/json")
	req.Header["Idempotency-Key"] = []string{key}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return keyedAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return keyedAnswer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")}
}

// countSessions counts the sessions in the store.
func (s *server) countSessions(t *testing.T) int {
	t.Helper()
	items, err := s.app.Store.ListSessions(context.Background(), store.SessionQuery{ListQuery: store.ListQuery{Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return len(items)
}

// logged returns the ids of the events of the type in the session's log
// that say text (each once, whatever its echoes).
func (s *server) logged(t *testing.T, sessionID, typ, text string) []string {
	t.Helper()
	entries, err := s.app.Store.ReadLog(context.Background(), sessionID, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]ma.Event, len(entries))
	for i, e := range entries {
		evs[i] = e.Event
	}
	ids := said(evs, typ, text)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// listed lists the session's events through the SDK.
func listed(t *testing.T, client anthropic.Client, sessionID string) []ma.Event {
	t.Helper()
	page, err := client.Beta.Sessions.Events.List(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]ma.Event, len(page.Data))
	for i, e := range page.Data {
		if err := json.Unmarshal([]byte(e.RawJSON()), &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// said returns the ids of the events of the type among evs that say text.
func said(evs []ma.Event, typ, text string) []string {
	var ids []string
	for _, ev := range evs {
		if ev.Type == typ && joinText(ev.Content) == text {
			ids = append(ids, ev.ID)
		}
	}
	return ids
}

// waitAnswered waits until the session is idle after its answer to the
// message text, and returns its events then.
func waitAnswered(t *testing.T, client anthropic.Client, sessionID, text string) []ma.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := listed(t, client, sessionID)
		sess, err := client.Beta.Sessions.Get(context.Background(), sessionID, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(said(evs, ma.EventAgentMessage, "You said: "+text)) > 0 && sess.Status == ma.StatusIdle {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: no answer to %q and idle after 30 s (%s)", sessionID, text, sess.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdempotencyKeyAcrossRestart: a send whose answer was lost after the
// server committed it, the server then killed (SIGKILL) and started again
// on its data dir, sent again through the SDK with its Idempotency-Key:
// the key is kept in the store, so the retry gets the first events and
// the message is in the log once, answered once.
func TestIdempotencyKeyAcrossRestart(t *testing.T) {
	bin, err := buildReins()
	if err != nil {
		t.Fatal(err)
	}
	dir, addr := t.TempDir(), freeAddr(t)
	c := startChild(t, bin, dir, addr, burstKey)
	defer func() { c.kill() }()
	p := newLoseProxy(t, c.url)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	d := newDefaultsChild(t, c, hc)
	agentID, envID := d.agentAndEnvironment(t)
	ctx := context.Background()
	sess, err := d.newSession(ctx, agentID, envID)
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := anthropic.NewClient(option.WithBaseURL(p.url), option.WithAPIKey(burstKey), option.WithHTTPClient(hc), option.WithMaxRetries(0))
	send := func() (*anthropic.BetaManagedAgentsSendSessionEvents, error) {
		return viaProxy.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("across a crash")}}, withKey("crash-1"))
	}
	p.loseNext("POST", "/v1/sessions/"+sess.ID+"/events", 1)
	if _, err := send(); err == nil {
		t.Fatal("the first send was answered; the proxy should have lost its answer")
	}
	c.kill()
	c = startChild(t, bin, dir, addr, burstKey)
	res, err := send()
	if err != nil {
		t.Fatalf("the send again after the restart: %v", err)
	}
	evs := waitAnswered(t, d.client, sess.ID, "across a crash")
	if ids := said(evs, ma.EventUserMessage, "across a crash"); len(ids) != 1 || len(res.Data) != 1 || ids[0] != res.Data[0].ID {
		t.Fatalf("messages %v in the log, the answer %s; want one, the answer's", ids, res.RawJSON())
	}
	if answers := said(evs, ma.EventAgentMessage, "You said: across a crash"); len(answers) != 1 {
		t.Fatalf("%d answers, want 1", len(answers))
	}
	stopChild(t, c)
}

// TestIdempotencyKeyAcrossReplicas: two replicas on one PostgreSQL
// database share the outcomes: a send repeated with its key on the other
// replica gets the first answer, and sends with one key made on both at
// once append one message.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	calls := &callCounter{calls: map[string]int{}}
	a := startReplica(t, dsn, "replica-a", calls)
	b := startReplica(t, dsn, "replica-b", calls)
	sess := a.newSession(t, a.newAgent(t, "scripted").ID, a.newEnv(t, "replicas").ID)
	path := "/v1/sessions/" + sess.ID + "/events"
	body := `{"events":[{"type":"user.message","content":[{"type":"text","text":"on a"}]}]}`
	first := a.keyed(t, a.key, path, "r1", body)
	again := b.keyed(t, a.key, path, "r1", body)
	if first.status != http.StatusOK || again.body != first.body || again.replayed != "true" {
		t.Fatalf("a send on replica a, repeated on b: %d %s then %d %s", first.status, first.body, again.status, again.body)
	}
	racing := strings.Replace(body, "on a", "on both", 1)
	var wg sync.WaitGroup
	answers := make([]keyedAnswer, 8)
	for i := range answers {
		on := []*server{a, b}[i%2]
		wg.Go(func() { answers[i] = on.keyed(t, a.key, path, "r2", racing) })
	}
	wg.Wait()
	for i, got := range answers {
		if got.status != http.StatusOK || got.body != answers[0].body {
			t.Fatalf("send %d with one key on both replicas: %d %s, want %s", i, got.status, got.body, answers[0].body)
		}
	}
	for text, want := range map[string]int{"on a": 1, "on both": 1} {
		if ids := a.logged(t, sess.ID, ma.EventUserMessage, text); len(ids) != want {
			t.Fatalf("%q: %d messages in the log, want %d", text, len(ids), want)
		}
	}
}
