package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
)

// TestUnknownFieldsAreRefused: a field an endpoint does not know, at any
// depth, is a 400 that names it (and what its object accepts), on every
// endpoint that takes a body and on those that take none; nothing is
// created or changed.
func TestUnknownFieldsAreRefused(t *testing.T) {
	s := start(t, options{})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	sess := s.newSession(t, a.ID, env.ID)
	hosted, _ := s.selfHosted(t, "hosted")
	var vault struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]string{"display_name": "v"}, &vault); err != nil {
		t.Fatal(err)
	}
	ids := strings.NewReplacer("{agent}", a.ID, "{env}", env.ID, "{sess}", sess.ID, "{hosted}", hosted, "{vault}", vault.ID)
	cases := []struct{ method, path, body, want string }{
		{"POST", "/v1/agents", `{"name":"x","model":"scripted","toolz":[]}`, "unknown field: toolz (accepted: description, execution_identity, mcp_servers, metadata, model, multiagent, name, skills, system, tools)"},
		{"POST", "/v1/agents", `{"name":"x","model":"scripted","toolz":[],"sytem":"s"}`, "unknown fields: sytem (accepted:"},
		{"POST", "/v1/agents", `{"name":"x","model":"scripted","tools":[{"type":"agent_toolset_20260401","default_config":{"enabeld":false}}]}`, "tools[0].default_config.enabeld"},
		{"POST", "/v1/agents", `{"name":"x","model":{"id":"scripted","sped":"fast"}}`, "model.sped"},
		{"POST", "/v1/agents", `{"Name":"x","model":"scripted"}`, "unknown field: Name"},
		{"POST", "/v1/agents/{agent}", `{"version":1,"nam":"y"}`, "unknown field: nam"},
		{"POST", "/v1/agents/{agent}/archive", `{"force":true}`, "unknown field: force (this endpoint takes no body)"},
		{"POST", "/v1/environments", `{"name":"e2","config":{"type":"cloud","networkin":{}}}`, "config.networkin"},
		{"POST", "/v1/environments/{env}", `{"descripton":"d"}`, "unknown field: descripton"},
		{"POST", "/v1/environments/{hosted}/keys", `{"name":"k"}`, "unknown field: name"},
		{"POST", "/v1/sessions", `{"agent":"{agent}","environment_id":"{env}","titel":"t"}`, "unknown field: titel"},
		{"POST", "/v1/sessions", `{"agent":{"type":"agent","id":"{agent}","versoin":1},"environment_id":"{env}"}`, "agent.versoin"},
		{"POST", "/v1/sessions/{sess}", `{"agent":{"toolz":[]}}`, "agent.toolz"},
		{"POST", "/v1/sessions/{sess}/events", `{"events":[{"type":"user.message","content":[{"type":"text","text":"hi","bold":true}]}]}`, "content[0].bold"},
		{"POST", "/v1/sessions/{sess}/events", `{"events":[],"wait":true}`, "unknown field: wait"},
		{"POST", "/v1/sessions/{sess}/archive", `{"reason":"x"}`, "unknown field: reason"},
		{"POST", "/v1/vaults", `{"display_name":"v","descripton":"d"}`, "descripton"},
		{"POST", "/v1/vaults/{vault}", `{"display_nam":"v"}`, "display_nam"},
		{"POST", "/v1/environments/{hosted}/work/work_nope/stop", `{"forse":true}`, "unknown field: forse"},
	}
	for _, c := range cases {
		path, body := ids.Replace(c.path), ids.Replace(c.body)
		req, _ := http.NewRequest(c.method, s.url+path, strings.NewReader(body))
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s %s: %d %s\nwant 400 with %q", c.method, c.path, c.body, resp.StatusCode, b, c.want)
		}
	}
	// Nothing was created or changed by the refused calls.
	var agents struct{ Data []struct{ ID string } }
	if _, err := call(s.url, s.key, "GET", "/v1/agents", nil, &agents); err != nil || len(agents.Data) != 1 {
		t.Errorf("agents after the refusals: %+v %v", agents.Data, err)
	}
}

// TestUnknownModelsAreRefused: a model id that no configured provider
// serves is a 400 at creation naming the configured providers, not a
// failure at the session's first turn.
func TestUnknownModelsAreRefused(t *testing.T) {
	s := start(t, options{models: model.Router{"anthropic": anthropic.New(anthropic.Options{APIKey: "sk-ant-unused"})}})
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env")
	cases := []struct{ method, path, body, want string }{
		{"POST", "/v1/agents", `{"name":"x","model":"gpt-4o"}`, `model: model \"gpt-4o\" is not served by this server: the anthropic provider calls the Anthropic API, which serves Claude models only`},
		{"POST", "/v1/agents", `{"name":"x","model":"openai/gpt-4o"}`, `needs the openai provider, which is not configured on this server (configured providers: anthropic, scripted;`},
		{"POST", "/v1/agents", `{"name":"x","model":{"id":"gpt-4o"}}`, `configured providers: anthropic, scripted`},
		{"POST", "/v1/agents/" + a.ID, `{"version":1,"model":"openai/gpt-4o"}`, `needs the openai provider`},
		{"POST", "/v1/sessions", `{"agent":{"type":"agent_with_overrides","id":"` + a.ID + `","model":"gpt-4o"},"environment_id":"` + env.ID + `"}`, `agent.model: model \"gpt-4o\"`},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, s.url+c.path, strings.NewReader(c.body))
		req.Header.Set("x-api-key", s.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s %s: %d %s\nwant 400 with %s", c.method, c.path, c.body, resp.StatusCode, b, c.want)
		}
	}
	// Claude models and the scripted provider's are served.
	for _, id := range []string{"claude-sonnet-5-5", "scripted/hello"} {
		s.newAgent(t, id)
	}
}
