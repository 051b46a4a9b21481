package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
)

// signOut signs the console out and waits for the sign-in form.
func signOut(t *testing.T, ctx context.Context) {
	t.Helper()
	run(t, ctx, "sign out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`input[name="api-key"]`)))
}

// TestConsoleWorkspaces drives the console with each role (issue 30): a
// read_only key sees its workspace's data with every write control
// disabled (and a write forced through anyway shows the server's 403); a
// developer of workspace A does not see workspace B's session nor the
// admin pages; an admin switches to workspace B and sees its session
// (still after a reload), pages through the audit log, and makes a
// read_only key of workspace B from the keys form.
func TestConsoleWorkspaces(t *testing.T) {
	s := start(t, options{})
	bg := context.Background()
	var kits [2]*wsKit
	for i, name := range []string{"team-a", "team-b"} {
		w, err := s.client.Organization.Workspaces.New(bg, anthropic.OrganizationWorkspaceNewParams{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		kits[i] = s.developer(t, w.ID, "dev-"+name, "developer")
		kits[i].makeAll(t, s)
	}
	a, b := kits[0], kits[1]
	ro := s.developer(t, a.ws, "ro-team-a", "read_only")
	ctx, _ := browser(t)
	base := s.url + "/console/"
	rowOf := func(id string) string { return fmt.Sprintf(`!!document.querySelector('tr[data-id=%q]')`, id) }

	// read_only: data visible, writes disabled with the reason.
	signIn(t, ctx, base, devKey(ro))
	run(t, ctx, "read_only header and list",
		waitJS(textIn("#who-role", "read-only")), waitJS(textIn("#who-ws", a.ws)), waitJS(textIn("#who-key", "ro-team-a")),
		waitJS(rowOf(a.session)),
		waitJS(`document.querySelector('a.button[aria-disabled="true"]').textContent === "New session"`),
		waitJS(`[...document.querySelectorAll('#nav a[data-admin]')].every(e => e.hidden) && document.getElementById("ws-pick").hidden`))
	run(t, ctx, "read_only session page",
		chromedp.Navigate(base+"#/sessions/"+a.session), waitJS(textIn(".conn", "live")),
		waitJS(`document.querySelector('textarea[name="message"]').disabled`),
		// Every control that would change the session; the thread tree's
		// buttons only pick which transcript to show.
		waitJS(`[...document.querySelectorAll("main button:not(.thread)")].length >= 4 && [...document.querySelectorAll("main button:not(.thread)")].every(b => b.disabled && b.title.includes("read-only"))`))
	// A write that reaches the server anyway shows its refusal.
	run(t, ctx, "a forced write is refused",
		chromedp.Evaluate[chromedp.Void](`void (() => { for (const e of document.querySelectorAll("form.composer textarea, form.composer button")) e.disabled = false; })()`),
		setValue(`textarea[name="message"]`, "hello"), pressSend,
		waitJS(textIn("form.composer .error", "permission_error")))
	for _, page := range []string{"#/environments", "#/vaults", "#/agents/new", "#/sessions/new", "#/vaults/" + a.vault, "#/agents/" + a.agent} {
		run(t, ctx, "read_only "+page, chromedp.Navigate(base+page), waitJS(`document.querySelector("main h1")`),
			waitJS(`[...document.querySelectorAll("main button, main a.button")].length > 0 && [...document.querySelectorAll("main button, main a.button")].every(b => (b.disabled || b.getAttribute("aria-disabled") === "true") && b.title.includes("read-only"))`))
	}
	run(t, ctx, "read_only admin pages", chromedp.Navigate(base+"#/keys"), waitJS(textIn("main h1", "For admin keys")))
	signOut(t, ctx)

	// developer of A: A's session, not B's; no admin pages.
	signIn(t, ctx, base, devKey(a))
	run(t, ctx, "developer list", waitJS(textIn("#who-role", "developer")), waitJS(rowOf(a.session)),
		waitJS(`document.querySelector('a.button').getAttribute("href") === "#/sessions/new"`),
		waitJS(`[...document.querySelectorAll('#nav a[data-admin]')].every(e => e.hidden) && document.getElementById("ws-pick").hidden`))
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](rowOf(b.session))); err != nil || ok {
		t.Fatalf("the developer of A sees B's session (%v)", err)
	}
	run(t, ctx, "developer audit", chromedp.Navigate(base+"#/audit"), waitJS(textIn("main h1", "For admin keys")))
	signOut(t, ctx)

	// admin: the picker, B's session after the switch, the audit log.
	for i := range 50 { // more than a page of audit log
		if _, err := call(s.url, s.key, "POST", "/v1/api_keys", map[string]string{"name": fmt.Sprintf("filler %d", i), "role": "developer", "workspace_id": a.ws}, nil); err != nil {
			t.Fatal(err)
		}
	}
	signIn(t, ctx, base, s.key)
	run(t, ctx, "admin header", waitJS(textIn("#who-role", "admin")), waitJS(`!document.getElementById("ws-pick").hidden`),
		waitJS(`[...document.querySelectorAll("#workspace option")].map(o => o.value).join() .includes("wrkspc_default")`),
		waitJS(fmt.Sprintf(`!!document.querySelector('#workspace option[value=%q]')`, b.ws)),
		waitJS(`document.getElementById("workspace").value === "wrkspc_default"`),
		waitJS(textIn("main table", "No sessions match.")))
	run(t, ctx, "switch to B", setValue("#workspace", b.ws), waitJS(rowOf(b.session)))
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](rowOf(a.session))); err != nil || ok {
		t.Fatalf("workspace B's list shows A's session (%v)", err)
	}
	run(t, ctx, "B is remembered", chromedp.Reload(), waitJS(rowOf(b.session)),
		waitJS(fmt.Sprintf(`document.getElementById("workspace").value === %q`, b.ws)))
	run(t, ctx, "B's session page", chromedp.Navigate(base+"#/sessions/"+b.session), waitJS(textIn(".conn", "live")))

	run(t, ctx, "audit log", chromedp.Navigate(base+"#/audit"),
		waitJS(textIn("table.audit", "api_key.created")), waitJS(textIn("table.audit", "filler 49")),
		waitJS(`document.querySelectorAll("table.audit tbody tr").length === 50`),
		chromedp.Click(chromedp.CSS(`.pager button`)),
		waitJS(`document.querySelectorAll("table.audit tbody tr").length > 50`),
		waitJS(textIn("table.audit", "workspace.created")))
	// Newest first: the last filler key comes before the first.
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const t = document.querySelector("table.audit").textContent; return t.indexOf("filler 49") < t.indexOf("filler 0"); })()`)); err != nil || !ok {
		t.Fatalf("the audit log is not newest first (%v)", err)
	}

	run(t, ctx, "a read_only key for B from the form",
		chromedp.Navigate(base+"#/keys"), waitJS(textIn("main table", "ro-team-a")),
		chromedp.SendKeys(chromedp.CSS(`input[name="key-name"]`), "dashboard b"),
		setValue(`select[name="key-role"]`, "read_only"),
		waitJS(fmt.Sprintf(`document.querySelector('select[name="key-workspace"]').value === %q`, b.ws)),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog .secret`)))
	key := textOf(t, ctx, "dialog .secret")
	var me struct {
		Role        string `json:"role"`
		WorkspaceID string `json:"workspace_id"`
	}
	if _, err := call(s.url, key, "GET", "/v1/api_keys/me", nil, &me); err != nil || me.Role != "read_only" || me.WorkspaceID != b.ws {
		t.Fatalf("the key made from the form: %+v %v", me, err)
	}
	run(t, ctx, "its row", chromedp.Click(chromedp.CSS(`dialog button:last-child`)), waitJS(textIn("main table", "dashboard b")))
}
