package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/reinsdev/reins/internal/app"
)

// tab is what a console tab did: the URLs it requested, and its
// problems — console errors, browser log errors, failed requests and
// answers of 400 or more. Uncaught exceptions fail the test at its end.
type tab struct {
	mu       sync.Mutex // guards the fields below
	seen     []string
	problems []string
	thrown   []string
}

// urls returns the URLs requested so far.
func (b *tab) urls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// takeProblems returns the problems seen since the last call.
func (b *tab) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

func (b *tab) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.seen = append(b.seen, ev.Request.URL)
	case *network.EventResponseReceived:
		if ev.Response.Status >= 400 {
			b.problems = append(b.problems, fmt.Sprintf("%d %s", ev.Response.Status, ev.Response.URL))
		}
	case *network.EventLoadingFailed:
		if !ev.Canceled { // a stream the page stops is cancelled
			b.problems = append(b.problems, "request failed: "+ev.ErrorText)
		}
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			b.problems = append(b.problems, fmt.Sprintf("log: %s %s", ev.Entry.Text, ev.Entry.URL))
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			b.problems = append(b.problems, fmt.Sprintf("console.%s", ev.Type))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		b.thrown = append(b.thrown, msg)
		b.problems = append(b.problems, "exception: "+msg)
	}
}

// browser starts a headless Chromium (Debian's chromium package) and
// returns a tab's context. Running as root, Chromium's own sandbox cannot
// start (it needs an unprivileged user), so --no-sandbox is passed then
// only. The tab records the requests and problems of its pages.
func browser(t *testing.T) (context.Context, *tab) {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("the console tests need Chromium: apt-get install chromium (.ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &tab{}
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(b.record))
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.thrown {
			t.Errorf("the page threw: %s", e)
		}
	})
	return ctx, b
}

// run runs actions with a deadline, failing the test with what was going on.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		t.Fatalf("%s: %v\npage: %s", what, err, body)
	}
}

// textOf returns the text of the first element sel matches.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(v)
}

// waitJS waits until the JavaScript expression is truthy.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}

// setValue sets a form control's value and fires its input and change
// events, as a user's edit does.
func setValue(sel, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`void (() => { const e = document.querySelector(%q); e.value = %q;
		e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); })()`, sel, v))
}

// pressSend presses the composer's Send button. It is pressed through the
// DOM, not at its coordinates: while events stream in the transcript
// grows and scrolls, and a click at coordinates measured a moment before
// can land beside the button on a loaded machine.
var pressSend = chromedp.Evaluate[chromedp.Void](`void document.querySelector('form.composer button[type="submit"]').click()`)

// textIn is a JavaScript test: some element matching sel contains s.
func textIn(sel, s string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent.includes(%q))`, sel, s)
}

// shot saves a full-page screenshot when REINS_CONSOLE_SCREENSHOTS names a
// directory (the README's pictures are made so).
func shot(t *testing.T, ctx context.Context, name string) {
	run(t, ctx, "settle", chromedp.Sleep(300*time.Millisecond))
	saveShot(t, ctx, name, chromedp.FullScreenshot(100))
}

// saveShot saves the screenshot capture takes when
// REINS_CONSOLE_SCREENSHOTS names a directory.
func saveShot(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	dir := os.Getenv("REINS_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsole drives the web console in a real headless Chromium: a wrong
// key refused, sign-in, an agent, an environment and a session made from
// its forms, a streamed reply, an always_ask tool call approved from the
// page, a session.error with its retry status, and the sessions list
// following another client. The key never appears in a URL, in the
// server's (debug) log or in local storage.
func TestConsole(t *testing.T) {
	logs := &syncBuffer{}
	s := startWith(t, options{}, func(c *app.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx, tb := browser(t)
	base := s.url + "/console/"

	// A wrong key is refused with the API's error.
	run(t, ctx, "wrong key",
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`input[name="api-key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="api-key"]`), "sk-reins-not-a-key"),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		waitJS(textIn(`form.signin .error`, "authentication_error")))
	shot(t, ctx, "signin")

	run(t, ctx, "sign in",
		setValue(`input[name="api-key"]`, ""),
		chromedp.SendKeys(chromedp.CSS(`input[name="api-key"]`), s.key),
		chromedp.Click(chromedp.CSS(`form.signin button[type="submit"]`)),
		waitJS(textIn("main h1", "Sessions")))

	// An agent from the form: the scripted model, tools on always_ask.
	run(t, ctx, "create an agent",
		chromedp.Navigate(base+"#/agents/new"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "console agent"),
		setValue(`select[name="policy"]`, "always_ask"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "console agent")))
	agentID := textOf(t, ctx, "main p.id")
	run(t, ctx, "create an environment",
		chromedp.Navigate(base+"#/environments"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "console env"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "console env")))
	envID := textOf(t, ctx, "main p.id")
	run(t, ctx, "create a session",
		chromedp.Navigate(base+"#/sessions/new"),
		waitJS(`document.querySelectorAll('select[name="environment"] option').length > 0`),
		setValue(`select[name="agent"]`, agentID),
		setValue(`select[name="environment"]`, envID),
		chromedp.SendKeys(chromedp.CSS(`input[name="title"]`), "Console demo"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn(".conn", "live")))

	// A streamed reply: its preview shows while the model writes, then the
	// final message.
	send := func(msg string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			setValue(`textarea[name="message"]`, msg),
			pressSend,
		)
	}
	run(t, ctx, "streamed reply",
		send("@pace 40ms\n@text Hello from the scripted model, word by word as it streams"),
		chromedp.WaitVisible(chromedp.CSS(`.ev.agent .text.streaming`)),
		waitJS(textIn(".ev.agent .text:not(.streaming)", "word by word as it streams")),
		waitJS(textIn(".stop", "end turn")))

	// A tool call waiting on always_ask, approved from the page.
	run(t, ctx, "approve a tool call",
		send("@tool bash {\"command\":\"echo approved-from-the-console\"}\n@then The command ran."),
		waitJS(textIn(".badge", "requires action")),
		chromedp.Click(chromedp.CSS(`.ev.tool button.ok`)),
		waitJS(textIn(".ev.tool .tool-actions", "Approved")),
		waitJS(textIn(".ev.tool .tool-result", "approved-from-the-console")),
		waitJS(textIn(".ev.agent", "The command ran.")))

	// Model failures: retried (wait), then given up (send again).
	run(t, ctx, "session.error retrying",
		send("@fail overloaded 1\n@text made it on the second try"),
		waitJS(textIn(".session-error.rs-retrying", "wait")),
		waitJS(textIn(".ev.agent", "made it on the second try")))
	run(t, ctx, "session.error exhausted",
		send("@fail overloaded"),
		waitJS(textIn(".session-error.rs-exhausted", "send your message again")),
		waitJS(textIn(".stop", "retries exhausted")))
	shot(t, ctx, "session")

	// The list follows another client: a session made and driven through
	// the SDK shows up and changes status without a reload.
	run(t, ctx, "sessions list", chromedp.Navigate(base+"#/sessions"), waitJS(textIn("table.sessions", "Console demo")))
	bg := context.Background()
	other, err := s.client.Beta.Sessions.New(bg, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)}, EnvironmentID: envID,
		Title: anthropic.String("Driven by the SDK"),
	})
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`tr[data-id=%q]`, other.ID)
	run(t, ctx, "a new session appears", waitJS(textIn(row, "Driven by the SDK")), waitJS(textIn(row, "idle")))
	s.send(t, other.ID, userMessage("@sleep 3s\n@text slept"))
	run(t, ctx, "it runs", waitJS(textIn(row, "running")))
	s.send(t, other.ID, userMessage("@tool bash {\"command\":\"true\"}"))
	run(t, ctx, "it waits on us", waitJS(textIn(row, "requires action")))
	shot(t, ctx, "sessions")

	// Filters are the server's.
	run(t, ctx, "status filter",
		setValue(`select[name="status"]`, "terminated"),
		waitJS(textIn("table.sessions", "No sessions match.")))

	// The agent's page: its versions and what changed between them.
	if _, err := s.client.Beta.Agents.Update(bg, agentID, anthropic.BetaAgentUpdateParams{Version: anthropic.Int(1), System: anthropic.String("Be brief.")}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "agent page", chromedp.Navigate(base+"#/agents/"+agentID), waitJS(textIn("main h2", "Compare versions")),
		waitJS(textIn(".diff .add", `"system": "Be brief."`)), waitJS(textIn(".diff .del", `"version": 1`)))
	shot(t, ctx, "agent")

	// Where the key went: session storage only, a header only.
	local, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(localStorage)`))
	if err != nil {
		t.Fatal(err)
	}
	session, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify(sessionStorage)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(local, s.key) || local != "{}" {
		t.Errorf("local storage holds %s", local)
	}
	if !strings.Contains(session, s.key) {
		t.Errorf("session storage does not hold the key: %s", session)
	}
	all := tb.urls()
	if len(all) < 10 {
		t.Fatalf("only %d requests recorded", len(all))
	}
	for _, u := range all {
		if strings.Contains(u, s.key) || strings.Contains(u, "sk-reins") {
			t.Errorf("a URL carries the key: %s", u)
		}
	}
	if l := logs.String(); !strings.Contains(l, "/v1/sessions") || strings.Contains(l, s.key) {
		t.Errorf("the server log has no requests or has the key (%d bytes)", len(l))
	}
}
