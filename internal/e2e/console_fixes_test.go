package e2e

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"

	ma "github.com/reinsdev/reins/managedagents"
)

// shown is a JavaScript test: the element sel matches is on the page and
// takes room (not hidden, not display: none).
func shown(sel string) string {
	return fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility === "visible"; })()`, sel)
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// settled waits a little for what a page started to finish, then fails the
// test with the tab's problems since the last call.
func settled(t *testing.T, ctx context.Context, tb *tab, page string) {
	t.Helper()
	run(t, ctx, "settle "+page, chromedp.Sleep(400*time.Millisecond))
	for _, p := range tb.takeProblems() {
		t.Errorf("%s: %s", page, p)
	}
}

// TestConsolePagesClean loads every page of the console and finds no
// console error, exception or failed request on any (the browser's own
// icon request included), nothing shown that hidden hides (the navigation
// while signed out, a vault field of the other credential type), and no
// stray "null" on the agents page.
func TestConsolePagesClean(t *testing.T) {
	s := start(t, options{})
	ctx, tb := browser(t)
	base := s.url + "/console/"
	a := s.newAgent(t, "scripted")
	cloud := s.newEnv(t, "cloud env")
	self, _ := s.selfHosted(t, "laptop")
	sess := s.newSession(t, a.ID, cloud.ID)
	s.send(t, sess.ID, userMessage("hello"))
	var v struct{ ID string }
	if _, err := call(s.url, s.key, "POST", "/v1/vaults", map[string]any{"display_name": "team"}, &v); err != nil {
		t.Fatal(err)
	}
	ms, err := s.client.Beta.MemoryStores.New(context.Background(), anthropic.BetaMemoryStoreNewParams{Name: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := s.client.Beta.MemoryStores.Memories.New(context.Background(), ms.ID, anthropic.BetaMemoryStoreMemoryNewParams{Path: "/a/b.md", Content: anthropic.String("hi")})
	if err != nil {
		t.Fatal(err)
	}

	run(t, ctx, "signed out", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`input[name="api-key"]`)))
	if evalJS[bool](t, ctx, shown("#nav")) || evalJS[bool](t, ctx, shown("#signout")) {
		t.Error("the navigation or Sign out shows while signed out")
	}
	settled(t, ctx, tb, "sign-in")
	signIn(t, ctx, base, s.key)

	pages := []struct{ hash, ready string }{
		{"#/sessions", textIn("table.sessions", sess.ID)},
		{"#/sessions/new", `document.querySelectorAll('select[name="environment"] option').length === 2`},
		{"#/sessions/" + sess.ID, textIn(".ev.agent", "You said: hello") + ` && ` + textIn(".conn", "live")},
		{"#/agents", textIn("main table", "test agent")},
		{"#/agents/new", textIn("main h1", "New agent")},
		{"#/agents/" + a.ID, textIn("main h2", "Compare versions")},
		{"#/environments", textIn("main table", "laptop")},
		{"#/environments/" + cloud.ID, textIn("main", "has no keys")},
		{"#/environments/" + self, textIn("main", "Queue depth")},
		{"#/vaults", textIn("main table", "team")},
		{"#/vaults/" + v.ID, textIn("main h2", "Credentials") + ` && !!document.querySelector("main table")`},
		{"#/memory", textIn("main table", "notes")},
		{"#/memory/" + ms.ID, textIn(".mem-tree", "a/") + ` && ` + textIn(".changes", "created")},
		{"#/memory/" + ms.ID + "/" + mem.ID, textIn(".mem-content", "hi") + ` && ` + textIn(".mem-diff", "nothing to compare")},
		{"#/keys", textIn("main table", "active")},
		{"#/webhooks", textIn("main", "No webhook endpoint yet.")},
	}
	for _, p := range pages {
		run(t, ctx, p.hash, chromedp.Navigate(base+p.hash), waitJS(p.ready))
		settled(t, ctx, tb, p.hash)
		if p.hash == "#/agents" || strings.HasPrefix(p.hash, "#/memory") {
			if txt := textOf(t, ctx, "main"); strings.Contains(txt, "null") {
				t.Errorf("the page %s shows %q", p.hash, txt)
			}
		}
	}

	// The vault page: the hosts field belongs to environment variables only.
	run(t, ctx, "vault form", chromedp.Navigate(base+"#/vaults/"+v.ID), chromedp.WaitVisible(chromedp.CSS(`input[name="target"]`)))
	if evalJS[bool](t, ctx, shown(`input[name="hosts"]`)) {
		t.Error("the hosts field shows for a static_bearer credential")
	}
	run(t, ctx, "environment variable", setValue(`select[name="kind"]`, "environment_variable"), waitJS(shown(`input[name="hosts"]`)))
	settled(t, ctx, tb, "vault form")

	for _, u := range tb.urls() {
		if strings.HasSuffix(u, "/favicon.ico") {
			t.Errorf("the browser asked for %s (the pages name their icon)", u)
		}
	}
}

// TestConsoleSessionsList: the sessions page costs the same few requests
// whatever the number of rows (the badges come from the list itself), and
// tells a session waiting on the user and a failed turn from a plain idle
// one, with a filter for each.
func TestConsoleSessionsList(t *testing.T) {
	s := start(t, options{})
	ctx, tb := browser(t)
	base := s.url + "/console/"
	a := s.newAgent(t, "scripted", toolset(true))
	env := s.newEnv(t, "env").ID
	for range 28 {
		s.newSession(t, a.ID, env)
	}
	waiting, failed := s.newSession(t, a.ID, env), s.newSession(t, a.ID, env)
	s.send(t, waiting.ID, userMessage(`@tool bash {"command":"true"}`))
	s.send(t, failed.ID, userMessage("@fail overloaded"))
	for id, want := range map[string]string{waiting.ID: ma.StopRequiresAction, failed.ID: ma.StopRetriesExhausted} {
		waitUntil(t, "stop reason "+want, func() bool {
			var got ma.Session
			_, err := call(s.url, s.key, "GET", "/v1/sessions/"+id, nil, &got)
			return err == nil && got.Status == ma.StatusIdle && got.StopReason != nil && got.StopReason.Type == want
		})
	}
	// The API's filter (a reins extension), and its refusal of a value it
	// does not know.
	var l struct{ Data []ma.Session }
	if _, err := call(s.url, s.key, "GET", "/v1/sessions?"+url.Values{"stop_reasons[]": {"requires_action"}}.Encode(), nil, &l); err != nil || len(l.Data) != 1 || l.Data[0].ID != waiting.ID {
		t.Fatalf("stop_reasons[]=requires_action: %v %+v", err, l.Data)
	}
	if code, _ := call(s.url, s.key, "GET", "/v1/sessions?stop_reasons[]=bored", nil, nil); code != 400 {
		t.Fatalf("an unknown stop reason: %d, want 400", code)
	}

	signIn(t, ctx, base, s.key)
	run(t, ctx, "agents", chromedp.Navigate(base+"#/agents"), waitJS(textIn("main table", "test agent")), chromedp.Sleep(300*time.Millisecond))
	mark := len(tb.urls())
	run(t, ctx, "sessions",
		chromedp.Navigate(base+"#/sessions"),
		waitJS(`document.querySelectorAll("table.sessions tbody tr").length === 25`),
		waitJS(textIn(fmt.Sprintf(`tr[data-id=%q]`, waiting.ID), "requires action")),
		waitJS(textIn(fmt.Sprintf(`tr[data-id=%q]`, failed.ID), "failed")),
		chromedp.Sleep(2500*time.Millisecond)) // a refresh
	var api []string
	for _, u := range tb.urls()[mark:] {
		if p, err := url.Parse(u); err == nil && strings.HasPrefix(p.Path, "/v1/") {
			api = append(api, p.Path)
		}
	}
	lists := 0
	for _, p := range api {
		if p == "/v1/sessions" {
			lists++
		}
	}
	// The agents and environments lists once, the page of sessions and
	// its refreshes: nothing per row.
	if others := len(api) - lists; others > 2 || lists > 3 {
		t.Errorf("the sessions page made %d requests for 25 rows: %v", len(api), api)
	}
	shot(t, ctx, "sessions-badges")

	row := func(id string) string { return fmt.Sprintf(`!!document.querySelector('tr[data-id=%q]')`, id) }
	only := func(id string) string {
		return `document.querySelectorAll("table.sessions tbody tr").length === 1 && ` + row(id)
	}
	run(t, ctx, "requires action filter", setValue(`select[name="status"]`, "requires-action"), waitJS(only(waiting.ID)))
	run(t, ctx, "failed filter", setValue(`select[name="status"]`, "failed"), waitJS(only(failed.ID)))
	run(t, ctx, "idle filter", setValue(`select[name="status"]`, "idle"), waitJS(`document.querySelectorAll("table.sessions tbody tr").length === 25`))
}

// TestConsoleTranscript: a long streamed reply stays in view while it
// grows, a message sent during a turn is drawn where the log has it
// (after that turn's reply, as the list endpoint orders it), and the
// agent's Markdown is rendered without letting any markup through.
func TestConsoleTranscript(t *testing.T) {
	s := start(t, options{})
	ctx, _ := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	send := func(msg string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(setValue(`textarea[name="message"]`, msg), pressSend)
	}
	run(t, ctx, "open", chromedp.EmulateViewport(1000, 700), chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")))

	// The preview is taller than the window and its end sits just above
	// the message box, while it still streams.
	words := strings.Repeat("streaming words keep coming ", 220)
	inView := func(times float64) string {
		return fmt.Sprintf(`(() => { const t = document.querySelector(".ev.agent .text.streaming"); if (!t) return false;
			const li = t.closest("li"), r = li.getBoundingClientRect(), c = document.querySelector("form.composer").getBoundingClientRect();
			return li.offsetHeight > %f * window.innerHeight && r.bottom <= c.top + 2 && r.bottom > c.top - 150; })()`, times)
	}
	run(t, ctx, "long reply", send("@pace 6ms\n@text "+words), waitJS(inView(1)), waitJS(inView(1.5)))
	saveShot(t, ctx, "transcript-streaming", chromedp.CaptureScreenshot())
	run(t, ctx, "long reply ends", waitJS(textIn(".stop", "end turn")))

	// A message sent during a turn.
	run(t, ctx, "mid-turn send",
		send("@sleep 4s\n@text first answer"),
		waitJS(textIn("main .head .badge", "running")),
		send("second message"),
		waitJS(textIn(".ev.user.queued", "second message")),
		waitJS(textIn(".ev.agent", "You said: second message")),
		waitJS(`!document.querySelector(".ev.user.queued")`))
	order := evalJS[[]string](t, ctx, `[...document.querySelectorAll(".transcript > li")].map(e => (e.dataset.eventId || "") + "|" + e.className + "|" + e.textContent)`)
	var domIDs []string
	first, second := -1, -1
	for i, o := range order {
		id, rest, _ := strings.Cut(o, "|")
		if id != "" {
			domIDs = append(domIDs, id)
		}
		if strings.HasPrefix(rest, "ev agent") && strings.Contains(rest, "first answer") {
			first = i
		}
		if strings.HasPrefix(rest, "ev user") && strings.Contains(rest, "second message") {
			second = i
		}
	}
	if first < 0 || second < first {
		t.Fatalf("the message sent during the turn is drawn at %d, the turn's reply at %d:\n%s", second, first, strings.Join(order, "\n"))
	}
	var listed []string
	for _, ev := range s.listAll(t, sess.ID) {
		if slices.Contains(domIDs, ev.ID) {
			listed = append(listed, ev.ID)
		}
	}
	if len(domIDs) < 6 || !slices.Equal(domIDs, listed) {
		t.Fatalf("the transcript's order %v, the list endpoint's %v", domIDs, listed)
	}

	// Markdown: the allowed forms rendered, everything else as text.
	md := "**bold** and `a <i>code</i>` and [site](https://example.com/x) and [bad](javascript:alert(1)) <img src=x onerror=alert(1)>\n\n" +
		"- one\n- two _em_ snake_case_name\n\n```\n<b>raw</b>\n```"
	run(t, ctx, "markdown", send(md), waitJS(textIn(".ev.agent .md", "site")))
	got := evalJS[map[string]any](t, ctx, `(() => { const m = [...document.querySelectorAll(".ev.agent .md")].at(-1); return {
		strong: m.querySelector("strong")?.textContent, code: m.querySelector("p code")?.textContent,
		link: m.querySelector("a")?.getAttribute("href"), links: m.querySelectorAll("a").length, rel: m.querySelector("a")?.rel,
		items: [...m.querySelectorAll("ul > li")].map(e => e.textContent).join("|"), em: m.querySelector("li em")?.textContent,
		pre: m.querySelector("pre code")?.textContent, tags: m.querySelectorAll("img, b, i, script").length, text: m.textContent }; })()`)
	want := map[string]any{"strong": "bold", "code": "a <i>code</i>", "link": "https://example.com/x", "links": 1.0,
		"rel": "noopener noreferrer nofollow", "items": "one|two em snake_case_name", "em": "em", "pre": "<b>raw</b>", "tags": 0.0}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("markdown %s = %v, want %v", k, got[k], w)
		}
	}
	if txt, _ := got["text"].(string); !strings.Contains(txt, "[bad](javascript:alert(1))") || !strings.Contains(txt, "<img src=x onerror=alert(1)>") {
		t.Errorf("the refused link or the markup is not shown as text: %q", txt)
	}
	shot(t, ctx, "transcript-markdown")
}

// typeCount counts the session's live events of a type.
func typeCount(t *testing.T, s *server, sessionID, typ string) int {
	t.Helper()
	n := 0
	for _, ev := range s.listAll(t, sessionID) {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// rgb parses a computed CSS colour, rgb() or rgba().
func rgb(t *testing.T, c string) [3]float64 {
	t.Helper()
	var r, g, b float64
	inner := c[strings.IndexByte(c, '(')+1 : strings.IndexByte(c, ')')]
	if _, err := fmt.Sscanf(strings.ReplaceAll(inner, ",", " "), "%f %f %f", &r, &g, &b); err != nil {
		t.Fatalf("colour %q: %v", c, err)
	}
	return [3]float64{r, g, b}
}

// contrast is the WCAG contrast ratio of two colours.
func contrast(a, b [3]float64) float64 {
	lum := func(c [3]float64) float64 {
		var l [3]float64
		for i, v := range c {
			v /= 255
			if v <= 0.03928 {
				l[i] = v / 12.92
			} else {
				l[i] = math.Pow((v+0.055)/1.055, 2.4)
			}
		}
		return 0.2126*l[0] + 0.7152*l[1] + 0.0722*l[2]
	}
	x, y := lum(a), lum(b)
	return (max(x, y) + 0.05) / (min(x, y) + 0.05)
}

// TestConsoleSteerControls: the Approve button's label can be read, a
// double click on a steering button sends once, Interrupt is offered only
// while a turn is on, a failed turn says so, an archived session offers no
// message box, and a deleted one says deleted.
func TestConsoleSteerControls(t *testing.T) {
	s := start(t, options{})
	ctx, _ := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted", toolset(true))
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	send := func(msg string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(setValue(`textarea[name="message"]`, msg), pressSend)
	}
	const interrupt = `document.querySelector('form.composer button[type="button"]')`
	run(t, ctx, "open", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".conn", "live")),
		waitJS(interrupt+".disabled"))

	run(t, ctx, "a tool call to approve",
		send(`@tool bash {"command":"echo approved-once"}`+"\n@then The command ran."),
		waitJS(textIn("main .head .badge", "requires action")),
		chromedp.WaitVisible(chromedp.CSS(`.ev.tool button.ok`)),
		waitJS("!"+interrupt+".disabled"))
	look := evalJS[map[string]string](t, ctx, `(() => { const b = document.querySelector(".ev.tool button.ok"), cs = getComputedStyle(b);
		return { color: cs.color, bg: cs.backgroundColor, text: b.innerText }; })()`)
	if c := contrast(rgb(t, look["color"]), rgb(t, look["bg"])); look["text"] != "Approve" || c < 4.5 {
		t.Errorf("the Approve button reads %q in %s on %s (contrast %.2f, want 4.5 or more)", look["text"], look["color"], look["bg"], c)
	}
	shot(t, ctx, "approve")
	run(t, ctx, "approve, double-clicked",
		chromedp.Evaluate[chromedp.Void](`void (() => { const b = document.querySelector(".ev.tool button.ok"); b.click(); b.click(); })()`),
		waitJS(textIn(".ev.tool .tool-actions", "Approved")),
		waitJS(textIn(".ev.agent", "The command ran.")),
		chromedp.Sleep(500*time.Millisecond))
	if n := typeCount(t, s, sess.ID, ma.EventUserToolConfirmation); n != 1 {
		t.Errorf("%d tool confirmations sent", n)
	}
	if e := evalJS[string](t, ctx, `document.querySelector("form.composer").textContent`); strings.Contains(e, "error") {
		t.Errorf("a double click shows an error: %s", e)
	}
	run(t, ctx, "idle again", waitJS(interrupt+".disabled"))

	run(t, ctx, "interrupt, double-clicked",
		send("@sleep 20s\n@text too late"),
		waitJS(textIn("main .head .badge", "running")),
		waitJS("!"+interrupt+".disabled"),
		chromedp.Evaluate[chromedp.Void](`void (() => { const b = `+interrupt+`; b.click(); b.click(); })()`),
		waitJS(textIn(".ev.sys", "Interrupted")),
		waitJS(textIn("main .head .badge", "idle")),
		waitJS(interrupt+".disabled"),
		chromedp.Sleep(500*time.Millisecond))
	if n := typeCount(t, s, sess.ID, ma.EventUserInterrupt); n != 1 {
		t.Errorf("%d interrupts sent", n)
	}
	if e := evalJS[string](t, ctx, `document.querySelector("form.composer").textContent`); strings.Contains(e, "error") {
		t.Errorf("a double click shows an error: %s", e)
	}

	run(t, ctx, "a failed turn", send("@fail overloaded"), waitJS(textIn("main .head .badge", "failed")))

	run(t, ctx, "archive",
		chromedp.Click(chromedp.CSS(`.actions button:first-child`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(textIn("#toast", "Session archived")),
		waitJS("!("+shown("form.composer")+")"),
		waitJS(textIn("main", "archived: it takes no more messages")))
	shot(t, ctx, "archived")

	if _, err := s.client.Beta.Sessions.Delete(context.Background(), sess.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "deleted", waitJS(textIn("main .head .badge", "deleted")), waitJS(textIn("main", "This session was deleted.")))
	if b := textOf(t, ctx, "main .head .badge"); strings.Contains(b, "terminated") {
		t.Errorf("a deleted session reads %q", b)
	}
}

// TestConsoleForms: an agent created from JSON alone, and a key the
// server refuses signing out once, with the server's reason, and nothing
// more asked of the server afterwards.
func TestConsoleForms(t *testing.T) {
	s := start(t, options{})
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	run(t, ctx, "agent from JSON",
		chromedp.Navigate(base+"#/agents/new"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
		chromedp.Click(chromedp.CSS(`#mode-json`)),
		chromedp.WaitVisible(chromedp.CSS(`textarea[name="json"]`)),
		setValue(`textarea[name="json"]`, `{"name": "from json", "model": "scripted", "system": "Be brief."}`),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "from json")),
		waitJS(textIn("main pre.code", "Be brief.")))
	run(t, ctx, "bad JSON",
		chromedp.Navigate(base+"#/agents/new"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="name"]`)),
		chromedp.Click(chromedp.CSS(`#mode-json`)),
		setValue(`textarea[name="json"]`, `{"name": `),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main form .error", "does not parse")))

	// A key the server refuses, found in the tab's storage.
	run(t, ctx, "refused key",
		chromedp.Navigate(base+"#/sessions"),
		waitJS(textIn("main h1", "Sessions")),
		chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem("reins.apiKey", "sk-reins-not-a-key")`),
		chromedp.Reload(),
		waitJS(textIn("form.signin .error", "Signed out")))
	mark := len(tb.urls())
	run(t, ctx, "two refreshes later", chromedp.Sleep(4500*time.Millisecond))
	if msg := textOf(t, ctx, "form.signin .error"); !strings.Contains(msg, "invalid or revoked API key") {
		t.Errorf("signed out with %q", msg)
	}
	for _, u := range tb.urls()[mark:] {
		if strings.Contains(u, "/v1/") {
			t.Errorf("a signed-out page asked for %s", u)
		}
	}
}
