package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
)

// signIn opens the console at base and signs in with key.
func signIn(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`input[name="api-key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="api-key"]`), key),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		waitJS(textIn("main h1", "Sessions")))
}

// pageHTML is the whole document's markup, dialogs and form values
// included (values typed in inputs are not in the markup: they are read
// apart).
func pageHTML(t *testing.T, ctx context.Context) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML + [...document.querySelectorAll("input,textarea")].map(e => e.value).join("\n")`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getStatus(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("x-api-key", key)
	req.Close = true
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestConsoleHandsAndSecrets: an environment key shown once and gone from
// the page after, the executor it connects listed with its capabilities
// and leases, a vault credential whose secret is never rendered, and the
// sessions list in a narrow window.
func TestConsoleHandsAndSecrets(t *testing.T) {
	s := start(t, options{})
	ctx, _ := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)

	run(t, ctx, "self-hosted environment",
		chromedp.Navigate(base+"#/environments"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "laptop"),
		setValue(`select[name="type"]`, "self_hosted"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "laptop")),
		waitJS(textIn("main", "No executor is connected")))
	envID := textOf(t, ctx, "main p.id")
	run(t, ctx, "create a key", chromedp.Click(chromedp.CSS(`main > button`)), chromedp.WaitVisible(chromedp.CSS(`dialog .secret`)))
	key := textOf(t, ctx, "dialog .secret")
	if !strings.HasPrefix(key, "reins_ek_") {
		t.Fatalf("the dialog shows %q", key)
	}
	run(t, ctx, "close the key", chromedp.Click(chromedp.CSS(`dialog button:last-child`)), waitJS(`!document.querySelector("dialog")`),
		waitJS(textIn("main table", "active")))
	if strings.Contains(pageHTML(t, ctx), key) {
		t.Fatal("the environment key is still on the page after its dialog closed")
	}

	startExecutorClient(t, s.url, key, "console-laptop")
	run(t, ctx, "the executor is listed", waitJS(textIn("main table", "console-laptop")), waitJS(textIn("main table", "0 of 8")))
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, envID)
	s.send(t, sess.ID, userMessage(`@tool bash {"command":"sleep 5"}`))
	run(t, ctx, "its lease is listed", waitJS(textIn("main table", "1 of 8")),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll("main table")][0].textContent.includes(%q)`, sess.ID)),
		waitJS(textIn("main", "Queue depth")),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll("main table")].at(-1).textContent.includes(%q)`, sess.ID)))
	shot(t, ctx, "environment")

	const token = "tok-never-shown-4242"
	run(t, ctx, "a vault",
		chromedp.Navigate(base+"#/vaults"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="display_name"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="display_name"]`), "team"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "team")),
		chromedp.WaitVisible(chromedp.CSS(`input[name="target"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="display_name"]`), "docs server"),
		chromedp.SendKeys(chromedp.CSS(`input[name="target"]`), "https://mcp.example.com/mcp"),
		chromedp.SendKeys(chromedp.CSS(`input[name="secret"]`), token),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main table", "docs server")))
	if strings.Contains(pageHTML(t, ctx), token) {
		t.Fatal("the credential's secret is on the page after it was saved")
	}
	run(t, ctx, "reload the vault", chromedp.Reload(), waitJS(textIn("main table", "static_bearer")))
	if strings.Contains(pageHTML(t, ctx), token) {
		t.Fatal("the credential's secret is rendered")
	}

	// API keys: made and shown once, then revoked from the page.
	run(t, ctx, "an API key",
		chromedp.Navigate(base+"#/keys"),
		waitJS(textIn("main table", "test")),
		chromedp.SendKeys(chromedp.CSS(`input[name="key-name"]`), "laptop cli"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog .secret`)))
	apiKey := textOf(t, ctx, "dialog .secret")
	run(t, ctx, "close the API key", chromedp.Click(chromedp.CSS(`dialog button:last-child`)), waitJS(`!document.querySelector("dialog")`),
		waitJS(textIn("main table", "laptop cli")))
	if !strings.HasPrefix(apiKey, "sk-reins-") || strings.Contains(pageHTML(t, ctx), apiKey) {
		t.Fatalf("API key %q: wrong shape, or still on the page", apiKey)
	}
	if code := getStatus(t, s.url+"/v1/agents", apiKey); code != 200 {
		t.Fatalf("the new key got %d", code)
	}
	if code := getStatus(t, s.url+"/v1/api_keys", key); code != 403 {
		t.Fatalf("an environment key listed API keys: %d", code)
	}
	run(t, ctx, "revoke it",
		chromedp.Click(chromedp.CSS(`main table tr:last-child button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(textIn("main table tr:last-child", "revoked")))
	deadline := time.Now().Add(5 * time.Second)
	for getStatus(t, s.url+"/v1/agents", apiKey) != 401 {
		if time.Now().After(deadline) {
			t.Fatal("the revoked key still works")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A narrow window: nothing scrolls sideways.
	run(t, ctx, "narrow",
		chromedp.EmulateViewport(390, 800, chromedp.EmulateScale(2)),
		chromedp.Navigate(base+"#/sessions"),
		waitJS(textIn("table.sessions", sess.ID)),
		waitJS(`document.documentElement.scrollWidth <= window.innerWidth`))
	shot(t, ctx, "narrow")
}

// TestConsoleStreamResume cuts the transcript's stream while another
// client sends: the page reconnects with Last-Event-ID and shows every
// event once.
func TestConsoleStreamResume(t *testing.T) {
	s := start(t, options{})
	p := newCutProxy(t, strings.TrimPrefix(s.url, "http://"))
	ctx, _ := browser(t)
	base := "http://" + p.addr + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	s.send(t, sess.ID, userMessage("first"))
	run(t, ctx, "transcript", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".ev.agent", "You said: first")), waitJS(textIn(".conn", "live")))

	for i := range 3 {
		p.cut()
		msg := fmt.Sprintf("while cut %d", i)
		if _, err := s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(msg)}}); err != nil {
			t.Fatal(err)
		}
		run(t, ctx, "resumed "+msg, waitJS(textIn(".ev.agent", "You said: "+msg)), waitJS(textIn(".conn", "live")))
	}
	// Each idle's session.usage snapshot replaces the usage in the header
	// instead of adding a line to the transcript.
	run(t, ctx, "usage shown", waitJS(textIn(".meta .usage", " out tokens")))
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]int](`(() => { const m = {}; for (const e of document.querySelectorAll(".transcript > li")) { const k = e.className + "|" + e.textContent; m[k] = (m[k] || 0) + 1; } return m; })()`))
	if err != nil {
		t.Fatal(err)
	}
	agents := 0
	for k, n := range counts {
		if n != 1 && !strings.Contains(k, "span") {
			t.Errorf("shown %d times: %s", n, k)
		}
		if strings.HasPrefix(k, "ev agent|") {
			agents++
		}
	}
	if agents != 4 {
		t.Errorf("%d agent messages on the page, want 4: %v", agents, counts)
	}
}

// TestConsoleSteer: a custom tool answered, a tool call denied with a
// message the model reads, a turn interrupted, and a session archived then
// deleted, each confirmed in a dialog.
func TestConsoleSteer(t *testing.T) {
	s := start(t, options{tools: &recordingTools{}})
	ctx, _ := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted", customTool("get_weather"), toolset(true))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	send := func(msg string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(setValue(`textarea[name="message"]`, msg), pressSend)
	}
	run(t, ctx, "open", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")))

	run(t, ctx, "custom tool",
		send(`@tool get_weather {"city":"Paris"}`+"\n@then Thanks for the weather."),
		chromedp.WaitVisible(chromedp.CSS(`textarea[name="custom-result"]`)),
		chromedp.SendKeys(chromedp.CSS(`textarea[name="custom-result"]`), "sunny, 21 C"),
		chromedp.Click(chromedp.CSS(`form.custom-answer button[type="submit"]`)),
		waitJS(textIn(".ev.tool.custom .tool-result", "sunny, 21 C")),
		waitJS(textIn(".ev.agent", "Thanks for the weather.")),
		waitJS(`!document.querySelector("form.custom-answer")`))

	run(t, ctx, "deny",
		send(`@tool bash {"command":"rm -rf /"}`),
		chromedp.WaitVisible(chromedp.CSS(`.ev.tool.builtin input[name="deny-message"]`)),
		chromedp.SendKeys(chromedp.CSS(`.ev.tool.builtin input[name="deny-message"]`), "not on my machine"),
		chromedp.Click(chromedp.CSS(`.ev.tool.builtin button.danger`)),
		waitJS(textIn(".ev.tool.builtin .tool-actions", "Denied: not on my machine")),
		waitJS(textIn(".ev.agent", "not on my machine")))

	run(t, ctx, "interrupt",
		send("@sleep 20s\n@text too late"),
		waitJS(textIn("main .head .badge", "running")),
		chromedp.Click(chromedp.CSS(`form.composer button[type="button"]`)),
		waitJS(textIn(".ev.sys", "Interrupted")),
		waitJS(textIn("main .head .badge", "idle")))

	run(t, ctx, "archive",
		chromedp.Click(chromedp.CSS(`.actions button:first-child`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(textIn("#toast", "Session archived")))
	got, err := s.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{})
	if err != nil || got.ArchivedAt.IsZero() {
		t.Fatalf("not archived: %v %+v", err, got)
	}
	run(t, ctx, "delete, cancelled",
		chromedp.Click(chromedp.CSS(`.actions button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button:last-child`)),
		waitJS(`!document.querySelector("dialog")`))
	if _, err := s.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{}); err != nil {
		t.Fatalf("deleted although cancelled: %v", err)
	}
	run(t, ctx, "delete",
		chromedp.Click(chromedp.CSS(`.actions button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(`location.hash === "#/sessions"`))
	_, err = s.client.Beta.Sessions.Get(context.Background(), sess.ID, anthropic.BetaSessionGetParams{})
	apiErr(t, err, 404, "not_found_error")
}
