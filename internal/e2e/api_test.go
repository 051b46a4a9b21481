package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

func apiErr(t *testing.T, err error, status int, typ string) {
	t.Helper()
	var ae *anthropic.Error
	if !errors.As(err, &ae) {
		t.Fatalf("got %v, want an *anthropic.Error %d", err, status)
	}
	if ae.StatusCode != status {
		t.Fatalf("status %d, want %d (%s)", ae.StatusCode, status, ae.RawJSON())
	}
	if !strings.Contains(ae.RawJSON(), `"type":"`+typ+`"`) || ae.RequestID == "" {
		t.Fatalf("envelope %s (request id %q), want type %s", ae.RawJSON(), ae.RequestID, typ)
	}
}

func TestAgentsCRUDAndVersions(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	a := s.newAgent(t, "scripted")
	if a.Version != 1 || a.Model.ID != "scripted" || a.Type != "agent" {
		t.Fatalf("created %+v", a)
	}
	up, err := s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1), System: anthropic.String("be brief")})
	if err != nil {
		t.Fatal(err)
	}
	if up.Version != 2 || up.System != "be brief" {
		t.Fatalf("updated %+v", up)
	}
	// A no-op update keeps the version.
	same, err := s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(2), System: anthropic.String("be brief")})
	if err != nil || same.Version != 2 {
		t.Fatalf("no-op update: %+v %v", same, err)
	}
	// Stale version: 409, not retried.
	_, err = s.client.Beta.Agents.Update(ctx, a.ID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1), System: anthropic.String("x")})
	apiErr(t, err, 409, "invalid_request_error")
	var ae *anthropic.Error
	errors.As(err, &ae)
	if ae.Response.Header.Get("x-should-retry") != "false" {
		t.Fatal("409 without x-should-retry: false")
	}
	v1, err := s.client.Beta.Agents.Get(ctx, a.ID, anthropic.BetaAgentGetParams{Version: anthropic.Int(1)})
	if err != nil || v1.Version != 1 || v1.System != "" {
		t.Fatalf("get version 1: %+v %v", v1, err)
	}
	vers, err := s.client.Beta.Agents.Versions.List(ctx, a.ID, anthropic.BetaAgentVersionListParams{})
	if err != nil || len(vers.Data) != 2 {
		t.Fatalf("versions: %v", err)
	}
	arch, err := s.client.Beta.Agents.Archive(ctx, a.ID, anthropic.BetaAgentArchiveParams{})
	if err != nil || arch.ArchivedAt.IsZero() {
		t.Fatalf("archive: %+v %v", arch, err)
	}
	_, err = s.client.Beta.Agents.Get(ctx, "agent_missing", anthropic.BetaAgentGetParams{})
	apiErr(t, err, 404, "not_found_error")
	_, err = s.client.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"}})
	apiErr(t, err, 400, "invalid_request_error")
}

func TestPaginationEndsWithNull(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	var want []string
	for range 7 {
		want = append(want, s.newAgent(t, "scripted").ID)
	}
	var got []string
	iter := s.client.Beta.Agents.ListAutoPaging(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(3)})
	for iter.Next() {
		got = append(got, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("auto-paged %v, want %v", got, want)
	}
	page, err := s.client.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{Limit: anthropic.Int(100)})
	if err != nil || page.NextPage != "" || len(page.Data) != 7 {
		t.Fatalf("last page: next=%q n=%d err=%v", page.NextPage, len(page.Data), err)
	}

	// Environments: names unique; list pages.
	e1 := s.newEnv(t, "one")
	s.newEnv(t, "two")
	_, err = s.client.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "one"})
	apiErr(t, err, 409, "invalid_request_error")
	envs := s.client.Beta.Environments.ListAutoPaging(ctx, anthropic.BetaEnvironmentListParams{Limit: anthropic.Int(1)})
	n := 0
	for envs.Next() {
		n++
	}
	if envs.Err() != nil || n != 2 {
		t.Fatalf("environments paged %d, %v", n, envs.Err())
	}
	del, err := s.client.Beta.Environments.Delete(ctx, e1.ID, anthropic.BetaEnvironmentDeleteParams{})
	if err != nil || del.ID != e1.ID {
		t.Fatalf("delete env: %+v %v", del, err)
	}

	// Sessions: bidirectional cursor, newest first by default.
	env := s.newEnv(t, "sessions")
	var sids []string
	for range 5 {
		sids = append(sids, s.newSession(t, want[0], env.ID).ID)
	}
	p1, err := s.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{Limit: anthropic.Int(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p1.Data) != 2 || p1.Data[0].ID != sids[4] || p1.NextPage == "" {
		t.Fatalf("first sessions page: %d next=%q", len(p1.Data), p1.NextPage)
	}
	all := s.client.Beta.Sessions.ListAutoPaging(ctx, anthropic.BetaSessionListParams{Limit: anthropic.Int(2), Order: anthropic.BetaSessionListParamsOrderAsc})
	var asc []string
	for all.Next() {
		asc = append(asc, all.Current().ID)
	}
	if all.Err() != nil || !slices.Equal(asc, sids) {
		t.Fatalf("asc sessions %v, want %v (%v)", asc, sids, all.Err())
	}
	// No session belongs to an unknown deployment: the filter is an
	// empty page, never every session.
	dep, err := s.client.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{DeploymentID: anthropic.String("depl_any")})
	if err != nil || len(dep.Data) != 0 || dep.NextPage != "" {
		t.Fatalf("sessions of a deployment: %d, next %q, %v", len(dep.Data), dep.NextPage, err)
	}
}

func TestErrorEnvelopes(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	bad := anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey("sk-reins-wrong"), option.WithMaxRetries(0))
	_, err := bad.Beta.Agents.List(ctx, anthropic.BetaAgentListParams{})
	apiErr(t, err, 401, "authentication_error")
	_, err = s.client.Beta.Sessions.Get(ctx, "sesn_nope", anthropic.BetaSessionGetParams{})
	apiErr(t, err, 404, "not_found_error")

	// Raw HTTP: malformed JSON, wrong types, unknown routes, oversized.
	for _, c := range []struct {
		method, path, body string
		status             int
		typ, msg           string
	}{
		{"POST", "/v1/agents", `{"name":`, 400, "invalid_request_error", "not valid JSON"},
		{"POST", "/v1/agents", `{"name": 5, "model":"scripted"}`, 400, "invalid_request_error", "name: expected a string"},
		{"POST", "/v1/agents", `[]`, 400, "invalid_request_error", ""},
		{"POST", "/v1/environments", `{"name":"x","config":{"type":"moon"}}`, 400, "invalid_request_error", "config.type"},
		{"GET", "/v1/nope", ``, 404, "not_found_error", "no route"},
		{"DELETE", "/v1/agents", ``, 405, "invalid_request_error", "not allowed"},
		{"GET", "/v1/agents?limit=0", ``, 400, "invalid_request_error", "limit"},
		{"GET", "/v1/agents?page=garbage", ``, 400, "invalid_request_error", "page"},
		{"POST", "/v1/sessions/sesn_x/events", `{"events":[{"type":"user.message","content":[]}]}`, 400, "invalid_request_error", "content"},
		{"POST", "/v1/sessions", `{"agent":"agent_nope","environment_id":"env_nope"}`, 404, "not_found_error", "agent"},
		{"POST", "/v1/agents", `{"name":"` + strings.Repeat("x", 5<<20) + `"}`, 413, "request_too_large", ""},
	} {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), fmt.Sprintf(`"type":"%s"`, c.typ)) || !strings.Contains(string(b), c.msg) ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("request-id") == "" {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(s.url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v", err)
	}
	resp.Body.Close()
}

func TestSendToEndedSessionsIsRefused(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	archived := s.newSession(t, a.ID, env.ID)
	if _, err := s.client.Beta.Sessions.Archive(ctx, archived.ID, anthropic.BetaSessionArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.client.Beta.Sessions.Events.Send(ctx, archived.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hi")}})
	apiErr(t, err, 409, "invalid_request_error")

	terminated := s.newSession(t, a.ID, env.ID)
	if _, err := storetest.Change(ctx, s.app.Store, terminated.ID, func(tx store.Tx) error {
		tx.Session().Status = ma.StatusTerminated
		return tx.Append(&ma.Event{Type: ma.EventStatusTerminated})
	}); err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Beta.Sessions.Events.Send(ctx, terminated.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage("hi")}})
	apiErr(t, err, 409, "invalid_request_error")

	// Deleting ends open streams with session.deleted.
	live := s.newSession(t, a.ID, env.ID)
	st := s.openStream(t, live.ID)
	if _, err := s.client.Beta.Sessions.Delete(ctx, live.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	if ev := st.next(5 * time.Second); ev.Type != "session.deleted" {
		t.Fatalf("stream got %s, want session.deleted", ev.Type)
	}
}

func TestSystemMessageRules(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted", customTool("lookup"))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	post := func(body string) int {
		st, _ := call(s.url, s.key, "POST", "/v1/sessions/"+sess.ID+"/events", json.RawMessage(body), nil)
		return st
	}
	st := s.openStream(t, sess.ID)
	if st := post(`{"events":[{"type":"user.message","content":[{"type":"text","text":"hi"}]},{"type":"system.message","content":[{"type":"text","text":"be brief"}]}]}`); st != 200 {
		t.Fatalf("system.message after user.message: %d", st)
	}
	st.until(isIdle)
	s.send(t, sess.ID, userMessage(`@tool lookup {}`))
	got := st.until(func(f frame) bool { return isIdle(f) && f.StopReason.Type == "requires_action" })
	use := got[len(got)-4]
	if st := post(`{"events":[{"type":"user.message","content":[{"type":"text","text":"x"}]},{"type":"system.message","content":[{"type":"text","text":"y"}]}]}`); st != 400 {
		t.Fatalf("system.message after a user.message while requires_action: %d, want 400", st)
	}
	if st := post(`{"events":[{"type":"user.custom_tool_result","custom_tool_use_id":"` + use.ID + `","content":[{"type":"text","text":"r"}]},{"type":"system.message","content":[{"type":"text","text":"z"}]}]}`); st != 200 {
		t.Fatalf("system.message after a tool result: %d", st)
	}
	if st := post(`{"events":[{"type":"system.message","content":[{"type":"text","text":"alone"}]}]}`); st != 400 {
		t.Fatalf("system.message alone: %d", st)
	}
}
