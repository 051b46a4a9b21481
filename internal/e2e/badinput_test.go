package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// TestEveryEndpointRefusesBadInput sends malformed JSON, wrong types,
// unknown ids, oversized bodies and events in the wrong state to every
// endpoint: each answer is a 4xx JSON envelope, never a 500.
func TestEveryEndpointRefusesBadInput(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	sess := s.newSession(t, a.ID, env.ID)
	hosted, _ := s.selfHosted(t, "hosted")
	ids := strings.NewReplacer("{agent}", a.ID, "{env}", env.ID, "{sess}", sess.ID, "{hosted}", hosted)

	routes := []struct{ method, path string }{
		{"POST", "/v1/agents"}, {"GET", "/v1/agents/{agent}"}, {"POST", "/v1/agents/{agent}"}, {"POST", "/v1/agents/{agent}/archive"},
		{"GET", "/v1/agents/{agent}/versions"}, {"GET", "/v1/agents"},
		{"POST", "/v1/environments"}, {"GET", "/v1/environments/{env}"}, {"POST", "/v1/environments/{env}"},
		{"POST", "/v1/environments/{env}/archive"}, {"DELETE", "/v1/environments/{env}"}, {"GET", "/v1/environments"},
		{"POST", "/v1/environments/{env}/keys"}, {"GET", "/v1/environments/{env}/keys"},
		{"POST", "/v1/sessions"}, {"GET", "/v1/sessions/{sess}"}, {"POST", "/v1/sessions/{sess}"}, {"POST", "/v1/sessions/{sess}/archive"},
		{"DELETE", "/v1/sessions/{sess}"}, {"GET", "/v1/sessions"}, {"POST", "/v1/sessions/{sess}/events"}, {"GET", "/v1/sessions/{sess}/events"},
		{"GET", "/v1/environments/{hosted}/work/poll"}, {"GET", "/v1/environments/{hosted}/work"}, {"GET", "/v1/environments/{hosted}/work/stats"},
		{"POST", "/v1/environments/{hosted}/work/work_nope/ack"}, {"POST", "/v1/environments/{hosted}/work/work_nope/heartbeat"},
		{"POST", "/v1/environments/{hosted}/work/work_nope/stop"}, {"GET", "/v1/environments/{hosted}/work/work_nope"},
	}
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var env struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if resp.StatusCode >= 400 && (json.Unmarshal(b, &env) != nil || env.Type != "error" || env.Error.Message == "") {
			t.Errorf("%s %s: %d without a JSON error envelope: %s", method, path, resp.StatusCode, b)
		}
		return resp.StatusCode, string(b)
	}
	check := func(what, method, path, body string) {
		st, b := do(method, path, body)
		if st >= 500 {
			t.Errorf("%s %s (%s): %d %s", method, path, what, st, b)
		}
	}
	for _, r := range routes {
		p := ids.Replace(r.path)
		// Unknown ids everywhere an id goes.
		unknown := strings.NewReplacer(a.ID, "agent_unknown", env.ID, "env_unknown", sess.ID, "sesn_unknown", hosted, "env_unknown2").Replace(p)
		if unknown != p {
			if st, b := do(r.method, unknown, "{}"); st != 404 && st != 400 {
				t.Errorf("%s %s with unknown ids: %d %s", r.method, unknown, st, b)
			}
		}
		if r.method != "POST" {
			continue
		}
		for what, body := range map[string]string{
			"malformed":  `{"name":`,
			"array":      `[1,2]`,
			"wrong type": `{"name":5,"model":7,"events":"x","title":[],"metadata":"m","config":1,"force":"yes","agent":5}`,
			"oversized":  `{"name":"` + strings.Repeat("x", 40<<20) + `"}`,
		} {
			check(what, r.method, p, body)
		}
	}
	// Events in the wrong state (on a fresh session: the loop above
	// archived the first one).
	fresh := s.newSession(t, s.newAgent(t, "scripted").ID, s.newEnv(t, "fresh").ID)
	for _, body := range []string{
		`{"events":[{"type":"user.tool_confirmation","tool_use_id":"sevt_nope","result":"allow"}]}`,
		`{"events":[{"type":"user.custom_tool_result","custom_tool_use_id":"sevt_nope"}]}`,
		`{"events":[{"type":"user.tool_result","tool_use_id":"sevt_nope"}]}`,
		`{"events":[{"type":"system.message","content":[{"type":"text","text":"x"}]}]}`,
		`{"events":[{"type":"agent.message","content":[{"type":"text","text":"x"}]}]}`,
		`{"events":[]}`,
	} {
		if st, b := do("POST", "/v1/sessions/"+fresh.ID+"/events", body); st != 400 {
			t.Errorf("events %s: %d %s", body, st, b)
		}
	}
}

// TestEnumFiltersRefuseUnknownValues sends an unknown value to every
// enumerated query parameter of every list endpoint (and the stream's
// event_deltas[]): each answer is a 400 invalid_request_error naming the
// parameter, the value and what is accepted. The accepted values still
// answer 200.
func TestEnumFiltersRefuseUnknownValues(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	sess := s.newSession(t, a.ID, env.ID)
	hosted, _ := s.selfHosted(t, "hosted")
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "enums"}, &v); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.url+path, nil)
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Type, Message string }
		}
		_ = json.Unmarshal(b, &e)
		return resp.StatusCode, e.Error.Type, e.Error.Message
	}
	events := "/v1/sessions/" + sess.ID + "/events"
	lists := []string{
		"/v1/agents", "/v1/agents/" + a.ID + "/versions", "/v1/environments", "/v1/sessions",
		"/v1/environments/" + hosted + "/work", "/v1/vaults", "/v1/vaults/" + v.ID + "/credentials",
	}
	type bad struct{ path, query, param, value, accepted string }
	var cases []bad
	for _, p := range lists {
		cases = append(cases,
			bad{p, "order=sideways", "order", "sideways", "asc, desc"},
			bad{p, "include_archived=maybe", "include_archived", "maybe", "true, false"})
	}
	cases = append(cases,
		bad{events, "order=sideways", "order", "sideways", "asc, desc"},
		bad{events, "types[]=no.such.type", "types[]", "no.such.type", "agent.message"},
		bad{events, "types[]=agent.message&types[]=no.such.type", "types[]", "no.such.type", "user.message"},
		bad{events, "types=agent.message,bogus", "types[]", "bogus", "session.status_idle"},
		bad{"/v1/sessions", "statuses[]=asleep", "statuses[]", "asleep", "idle, running, rescheduling, terminated"},
		bad{"/v1/sessions", "statuses[]=idle&statuses[]=Idle", "statuses[]", "Idle", "idle"},
		bad{events + "/stream", "event_deltas[]=user.message", "event_deltas[]", "user.message", "agent.message, agent.thinking"},
	)
	for _, c := range cases {
		path := c.path + "?" + c.query
		st, typ, msg := get(path)
		if st != 400 || typ != "invalid_request_error" {
			t.Errorf("GET %s: %d %s %q, want 400 invalid_request_error", path, st, typ, msg)
			continue
		}
		for _, want := range []string{c.param + ":", `"` + c.value + `"`, "expected one of", c.accepted} {
			if !strings.Contains(msg, want) {
				t.Errorf("GET %s: message %q does not contain %q", path, msg, want)
			}
		}
	}
	// The official SDK sends types[] the same way and gets the 400 as an
	// API error; the accepted types still list.
	ctx := context.Background()
	_, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{
		Types: []anthropic.BetaManagedAgentsSessionEventType{"no.such.type"},
	})
	apiErr(t, err, 400, "invalid_request_error")
	if ae := (*anthropic.Error)(nil); errors.As(err, &ae) && !strings.Contains(ae.RawJSON(), `types[]: unknown event type \"no.such.type\"`) {
		t.Errorf("SDK types[] error %s does not name the value", ae.RawJSON())
	}
	if _, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{
		Types: []anthropic.BetaManagedAgentsSessionEventType{anthropic.BetaManagedAgentsSessionEventTypeUserMessage, anthropic.BetaManagedAgentsSessionEventTypeSessionThreadCreated},
	}); err != nil {
		t.Errorf("SDK list with known types: %v", err)
	}
	for _, path := range []string{
		events + "?types[]=agent.message&types[]=session.status_idle&order=desc",
		events + "?types[]=workflow_run.created",
		"/v1/sessions?statuses[]=idle&statuses[]=terminated&order=asc&include_archived=true",
		"/v1/agents?include_archived=false&order=desc",
		"/v1/vaults/" + v.ID + "/credentials?include_archived=1",
	} {
		if st, _, msg := get(path); st != 200 {
			t.Errorf("GET %s: %d %q, want 200", path, st, msg)
		}
	}
}
