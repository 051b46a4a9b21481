package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/reinsdev/reins/internal/app"
)

// webFetchTools is an agent toolset with web_fetch enabled.
func webFetchTools() anthropic.BetaAgentNewParamsToolUnion {
	return anthropic.BetaAgentNewParamsToolUnion{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Configs: []anthropic.BetaManagedAgentsAgentToolConfigParamsUnion{{OfWebFetch: &anthropic.BetaManagedAgentsWebFetchToolConfigParams{Enabled: anthropic.Bool(true)}}},
	}}
}

// webPages serves an HTML page, a page larger than web_fetch's limit and a
// redirect to the HTML page.
func webPages(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>Fetch &amp; tell</title><style>p{color:red}</style><script>var secret = 1;</script></head>`+
			`<body><h1>Hello from the page</h1><p>First&nbsp;paragraph.</p><p>Second <b>bold</b> one.</p></body></html>`)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "BEGIN"+strings.Repeat("x", 3<<20)+"END")
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/page", http.StatusFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// fetchResult has the scripted model call web_fetch on url and returns the
// tool result's text and whether it is an error.
func (s *server) fetchResult(t *testing.T, sessionID, url string) (string, bool) {
	t.Helper()
	st := s.openStream(t, sessionID)
	defer st.cancel()
	s.send(t, sessionID, userMessage(fmt.Sprintf(`@tool web_fetch {"url":%q}`+"\n@then done", url)))
	var out strings.Builder
	isErr, uses := false, 0
	for _, ev := range st.until(isIdle) {
		switch ev.Type {
		case "agent.tool_use":
			if ev.Name != "web_fetch" || ev.EvaluatedPermission != "allow" {
				t.Fatalf("tool use: %+v", ev)
			}
			uses++
		case "agent.tool_result":
			for _, b := range ev.Content {
				out.WriteString(b.Text)
			}
			isErr = ev.IsError != nil && *ev.IsError
		}
	}
	if uses != 1 {
		t.Fatalf("%d web_fetch tool uses", uses)
	}
	return out.String(), isErr
}

// TestWebFetch: an agent of a model other than Claude with web_fetch
// enabled fetches a page through reins; HTML reaches the transcript as
// text, redirects are followed, a large page is cut at the limit, and a
// host the environment's limited networking does not list is refused.
func TestWebFetch(t *testing.T) {
	s := start(t, options{})
	pages := webPages(t)
	agent := s.newAgent(t, "scripted", webFetchTools())
	env := s.newEnv(t, "web")
	sess := s.newSession(t, agent.ID, env.ID)

	out, isErr := s.fetchResult(t, sess.ID, pages.URL+"/page")
	if isErr {
		t.Fatalf("error result: %s", out)
	}
	for _, want := range []string{"Title: Fetch & tell", "Hello from the page", "First\u00a0paragraph.", "Second bold one.", "Status: 200 OK"} {
		if !strings.Contains(out, want) {
			t.Fatalf("result lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret") || strings.Contains(out, "color:red") || strings.Contains(out, "<p>") {
		t.Fatalf("scripts, styles or tags reached the text:\n%s", out)
	}

	out, isErr = s.fetchResult(t, sess.ID, pages.URL+"/moved")
	if isErr || !strings.Contains(out, "Hello from the page") || !strings.Contains(out, "URL: "+pages.URL+"/page") {
		t.Fatalf("redirect: %v %s", isErr, out)
	}

	out, isErr = s.fetchResult(t, sess.ID, pages.URL+"/big")
	if isErr || !strings.Contains(out, "BEGIN") || strings.Contains(out, "END") || !strings.Contains(out, "[truncated") || len(out) > 200_000 {
		t.Fatalf("big page: error %v, %d bytes, tail %q", isErr, len(out), out[max(0, len(out)-200):])
	}

	out, isErr = s.fetchResult(t, sess.ID, "file:///etc/passwd")
	if !isErr || !strings.Contains(out, "only http and https") {
		t.Fatalf("file URL: %v %s", isErr, out)
	}

	// An environment whose limited networking does not list the host.
	limited, err := s.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{
		Name: "limited",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{"example.com"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sess2 := s.newSession(t, agent.ID, limited.ID)
	out, isErr = s.fetchResult(t, sess2.ID, pages.URL+"/page")
	if !isErr || !strings.Contains(out, "does not allow host 127.0.0.1") || strings.Contains(out, "Hello") {
		t.Fatalf("limited networking: %v %s", isErr, out)
	}
}

// TestWebFetchPrivateRefused: without the operator's allowance, a loopback
// address is refused by the outbound guard, whatever the environment says.
func TestWebFetchPrivateRefused(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.OutboundAllow = nil })
	pages := webPages(t)
	agent := s.newAgent(t, "scripted", webFetchTools())
	sess := s.newSession(t, agent.ID, s.newEnv(t, "web").ID)
	out, isErr := s.fetchResult(t, sess.ID, pages.URL+"/page")
	if !isErr || strings.Contains(out, "Hello") || !strings.Contains(out, "127.0.0.1") {
		t.Fatalf("loopback: %v %s", isErr, out)
	}
	t.Logf("refusal: %s", out)
}
