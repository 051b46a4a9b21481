package e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// toolOutput runs one bash command through the scripted model and returns
// the tool result's text. The wait is long: the first call of a session
// places its resources first, a few megabytes through bash, which on a
// loaded 2-core CI machine under -race took more than until's 10 s.
func (s *server) toolOutput(t *testing.T, sessionID, command string) string {
	t.Helper()
	st := s.openStream(t, sessionID)
	defer st.cancel()
	s.send(t, sessionID, userMessage(fmt.Sprintf(`@tool bash {"command":%q}`+"\n@then done", command)))
	var out strings.Builder
	for _, ev := range st.untilWithin(isIdle, time.Minute) {
		if ev.Type == "agent.tool_result" {
			for _, b := range ev.Content {
				out.WriteString(b.Text)
			}
		}
	}
	return out.String()
}

// TestFileResources: a session created with file resources finds them in
// its workspace, read-only, from its first bash call; resources are added,
// listed, got and deleted on the live session (each change a
// session.updated); bad resources are refused.
func TestFileResources(t *testing.T) {
	s := start(t, options{})
	ctx := context.Background()
	upload := func(name, content string) string {
		f, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader(content), name, "text/plain")})
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	notes := upload("notes.txt", "line one\nline two\n")
	binary := bytes.Repeat([]byte{0, 1, 2, 255}, 700000) // over two pieces of a placing command
	bin, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(binary), "blob.bin", "application/octet-stream")})
	if err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, "scripted", toolset(false))
	env := s.newEnv(t, "cloud")
	newSession := func(res ...anthropic.BetaSessionNewParamsResourceUnion) (*anthropic.BetaManagedAgentsSession, error) {
		return s.client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(a.ID)},
			EnvironmentID: env.ID,
			Resources:     res,
		})
	}
	file := func(id, mount string) anthropic.BetaSessionNewParamsResourceUnion {
		p := &anthropic.BetaManagedAgentsFileResourceParams{FileID: id}
		if mount != "" {
			p.MountPath = anthropic.String(mount)
		}
		return anthropic.BetaSessionNewParamsResourceUnion{OfFile: p}
	}

	// Refusals.
	_, err = newSession(file(notes, "/etc/passwd"))
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	_, err = newSession(file(notes, "/workspace/../etc/x"))
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	_, err = newSession(file("file_missing", ""))
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = newSession(anthropic.BetaSessionNewParamsResourceUnion{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{MemoryStoreID: "memstore_1"}})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	if !strings.Contains(err.Error(), "memory store memstore_1") {
		t.Fatalf("memory_store refusal does not say why: %v", err)
	}

	sess, err := newSession(file(notes, "/workspace/docs/notes.txt"), file(bin.ID, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(sess.Resources) != 2 || sess.Resources[0].MountPath != "/workspace/docs/notes.txt" || sess.Resources[1].MountPath != "/workspace/uploads/"+bin.ID {
		t.Fatalf("resources %s", sess.RawJSON())
	}
	out := s.toolOutput(t, sess.ID, "cat /workspace/docs/notes.txt; stat -c %a docs/notes.txt; md5sum < uploads/"+bin.ID+"; echo x > docs/notes.txt")
	if !strings.Contains(out, "line one\nline two\n444") || !strings.Contains(out, "Permission denied") {
		t.Fatalf("bash saw: %q", out)
	}
	if want := fmt.Sprintf("%x", md5sum(binary)); !strings.Contains(out, want) {
		t.Fatalf("binary file: bash saw %q, want md5 %s", out, want)
	}

	// The resource endpoints on the live session.
	list, err := s.client.Beta.Sessions.Resources.List(ctx, sess.ID, anthropic.BetaSessionResourceListParams{})
	if err != nil || len(list.Data) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	got, err := s.client.Beta.Sessions.Resources.Get(ctx, list.Data[0].ID, anthropic.BetaSessionResourceGetParams{SessionID: sess.ID})
	if err != nil || got.FileID != notes {
		t.Fatalf("get: %v %v", got, err)
	}
	later := upload("later.txt", "added later\n")
	added, err := s.client.Beta.Sessions.Resources.Add(ctx, sess.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: later, MountPath: anthropic.String("later.txt")},
	})
	if err != nil || added.MountPath != "/workspace/later.txt" || added.ID == "" {
		t.Fatalf("add: %v %v", added, err)
	}
	_, err = s.client.Beta.Sessions.Resources.Add(ctx, sess.ID, anthropic.BetaSessionResourceAddParams{
		BetaManagedAgentsFileResourceParams: anthropic.BetaManagedAgentsFileResourceParams{FileID: later, MountPath: anthropic.String("/workspace/later.txt")},
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error") // the same mount path twice
	del, err := s.client.Beta.Sessions.Resources.Delete(ctx, list.Data[0].ID, anthropic.BetaSessionResourceDeleteParams{SessionID: sess.ID})
	if err != nil || del.ID != list.Data[0].ID {
		t.Fatalf("delete: %v %v", del, err)
	}
	_, err = s.client.Beta.Sessions.Resources.Get(ctx, list.Data[0].ID, anthropic.BetaSessionResourceGetParams{SessionID: sess.ID})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	out = s.toolOutput(t, sess.ID, "cat later.txt; ls docs")
	if !strings.Contains(out, "added later") || strings.Contains(out, "notes.txt") {
		t.Fatalf("after add and delete, bash saw: %q", out)
	}
	evs, err := s.client.Beta.Sessions.Events.List(ctx, sess.ID, anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"session.updated"}})
	if err != nil || len(evs.Data) != 2 {
		t.Fatalf("session.updated events: %v %v", evs, err)
	}
}

func md5sum(b []byte) [16]byte { return md5.Sum(b) }

// TestWebToolsRefused: enabling web_search for a model other than Claude
// (no search backend) is a clear 400, never a tool silently left out, at
// creation, at an update that switches the model, and at a session's
// override; for a Claude model both web tools are accepted (Anthropic's
// server tools).
func TestWebToolsRefused(t *testing.T) {
	s, _ := startWithFakeAnthropic(t)
	webSearch := anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{}}}, // enabled by the toolset's default
	}}
	_, err := s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name:  "web",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{webSearch},
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	if !strings.Contains(err.Error(), "tools[0].configs[0]: web_search is not supported for scripted by this server: it has no search backend") {
		t.Fatal(err)
	}
	// Turned off explicitly, it is accepted.
	_, err = s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name:  "no web",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{Enabled: anthropic.Bool(false)}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// For Claude they run at Anthropic: no confirmation can be awaited.
	_, err = s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name:  "asking web",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-6"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{
				PermissionPolicy: anthropic.BetaManagedAgentsWebSearchToolConfigParamsPermissionPolicyUnion{OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{}},
			}}},
		}}},
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	if !strings.Contains(err.Error(), "web_search for Claude models is Anthropic's server tool, which runs during the model call and cannot wait for a confirmation") {
		t.Fatal(err)
	}
	// For Claude, web_search and web_fetch are accepted...
	a := s.newAgent(t, "claude-sonnet-4-6", anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{
			{OfWebSearch: &anthropic.BetaManagedAgentsWebSearchToolConfigParams{}},
			{OfWebFetch: &anthropic.BetaManagedAgentsWebFetchToolConfigParams{Enabled: anthropic.Bool(true)}},
		},
	}})
	// ...but the agent cannot then switch to a model without web_search.
	_, err = s.client.Beta.Agents.Update(context.Background(), a.ID, anthropic.BetaAgentUpdateParams{
		Version: anthropic.Int(a.Version),
		Model:   anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted"},
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	if !strings.Contains(err.Error(), "web_search is not supported for scripted") {
		t.Fatal(err)
	}
	// Nor can a session override its model.
	_, err = s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfBetaManagedAgentsAgentWithOverrides: &anthropic.BetaManagedAgentsAgentWithOverridesParams{
			ID: a.ID, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "scripted/demo"},
		}},
		EnvironmentID: s.newEnv(t, "web").ID,
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	if !strings.Contains(err.Error(), "agent.tools[0].configs[0]: web_search is not supported for scripted/demo") {
		t.Fatal(err)
	}
}
