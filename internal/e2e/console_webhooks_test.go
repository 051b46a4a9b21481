package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/reinsdev/reins/internal/webhooks"
)

// TestConsoleWebhooks drives the webhooks page in headless Chromium: the
// form offers the server's event types; an API error (no event type) is
// shown in the form; an endpoint registered from the form at a loopback
// receiver shows its signing secret once (gone from the page once the
// dialog closes), and the receiver verifies the deliveries of a new
// environment and session with that secret through the SDK's verifier. The
// endpoint is disabled from the page (the API says so) and enabled again;
// a new secret from the page signs the next delivery; an endpoint the
// server auto-disabled (its receiver redirects) shows why and is
// re-enabled from the page; delete asks first. The page fits a 390 px
// window, and a read-only key sees the endpoints with every control
// disabled.
func TestConsoleWebhooks(t *testing.T) {
	s := startWith(t, options{}, fastWebhooks)
	bg := context.Background()
	hooks := s.client.Beta.Organization.Webhooks
	rc := newReceiver(t)
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)

	box := func(typ string) string { return fmt.Sprintf(`input[name="webhook-event"][value=%q]`, typ) }
	run(t, ctx, "the page",
		chromedp.Click(chromedp.CSS(`#nav a[href="#/webhooks"]`)),
		waitJS(textIn("main h1", "Webhooks")), waitJS(textIn("main", "No webhook endpoint yet.")),
		waitJS(fmt.Sprintf(`document.querySelectorAll('input[name="webhook-event"]').length === %d`, len(webhooks.EventTypes))),
		waitJS(`document.querySelector('#nav a[href="#/webhooks"]').getAttribute("aria-current") === "page"`))
	for _, typ := range webhooks.EventTypes {
		if !evalJS[bool](t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, box(typ))) {
			t.Errorf("the form does not offer %s", typ)
		}
	}

	run(t, ctx, "no event type: the API's error",
		setValue(`input[name="webhook-url"]`, rc.srv.URL+"/hook"),
		chromedp.Click(chromedp.CSS(`form.webhook-new button[type="submit"]`)),
		waitJS(textIn("form.webhook-new .error", "invalid_request_error: enabled_events: give at least one event type")))
	// The browser logs the 400 it was meant to get; nothing else.
	for _, p := range tb.takeProblems() {
		if !strings.Contains(p, "400") {
			t.Errorf("the refused create: %s", p)
		}
	}
	run(t, ctx, "create",
		setValue(`input[name="webhook-name"]`, "ci <b>hook</b>"),
		setValue(`input[name="webhook-description"]`, "the e2e receiver"),
		chromedp.Click(chromedp.CSS(box("session.created"))), chromedp.Click(chromedp.CSS(box("environment.created"))),
		chromedp.Click(chromedp.CSS(`form.webhook-new button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog .secret`)),
		waitJS(`[...document.querySelectorAll("dialog button")].some(b => b.textContent === "Copy")`))
	secret := textOf(t, ctx, "dialog .secret")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the dialog shows %q", secret)
	}
	// The dialog closes from the keyboard.
	run(t, ctx, "close the secret", chromedp.KeyEvent(kb.Escape), waitJS(`!document.querySelector("dialog")`),
		waitJS(`!!document.querySelector("tr[data-id]")`))
	if strings.Contains(pageHTML(t, ctx), secret) {
		t.Fatal("the signing secret is still on the page after its dialog closed")
	}
	id := evalJS[string](t, ctx, `document.querySelector("tr[data-id]").dataset.id`)
	row := fmt.Sprintf(`tr[data-id=%q]`, id)
	run(t, ctx, "the row",
		waitJS(textIn(row, "ci <b>hook</b>")), waitJS(textIn(row, rc.srv.URL+"/hook")), waitJS(textIn(row, "the e2e receiver")),
		waitJS(textIn(row+" .badge", "enabled")), waitJS(textIn(row+" .wh-events", "session.created")), waitJS(textIn(row+" .wh-events", "environment.created")),
		waitJS(`document.querySelectorAll('input[name="webhook-event"]:checked').length === 0 && document.querySelector('input[name="webhook-url"]').value === ""`))
	if n := evalJS[int](t, ctx, `document.querySelectorAll("main b").length`); n != 0 {
		t.Errorf("the endpoint's name became markup (%d elements)", n)
	}
	ep, err := hooks.Get(bg, id, anthropic.BetaOrganizationWebhookGetParams{})
	if err != nil || ep.Name != "ci <b>hook</b>" || ep.Description != "the e2e receiver" || ep.URL != rc.srv.URL+"/hook" ||
		strings.Join(ep.EnabledEvents, ",") != "session.created,environment.created" || ep.State != "enabled" {
		t.Fatalf("the endpoint made from the form: %v, %v", ep.RawJSON(), err)
	}
	settled(t, ctx, tb, "webhooks")

	// Deliveries verify with the secret the dialog showed.
	rc.mu.Lock()
	rc.secret = secret
	rc.mu.Unlock()
	env := s.newEnv(t, "hooked")
	rc.wait("environment.created", env.ID, 10*time.Second)
	sess := s.newSession(t, s.newAgent(t, "scripted").ID, env.ID)
	rc.wait("session.created", sess.ID, 10*time.Second)

	run(t, ctx, "disable",
		chromedp.Click(chromedp.CSS(row+" button.toggle")),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q)?.dataset.state === "disabled"`, row)),
		waitJS(textIn(row+" .badge", "disabled")), waitJS(textIn(row+" button.toggle", "Enable")))
	if ep, err := hooks.Get(bg, id, anthropic.BetaOrganizationWebhookGetParams{}); err != nil || ep.State != "disabled" || ep.DisabledReason != "" {
		t.Fatalf("after Disable: %v, %v", ep.RawJSON(), err)
	}
	run(t, ctx, "enable",
		chromedp.Click(chromedp.CSS(row+" button.toggle")),
		waitJS(fmt.Sprintf(`document.querySelector(%q)?.dataset.state === "enabled"`, row)))

	run(t, ctx, "a new secret",
		chromedp.Click(chromedp.CSS(row+" button.rotate")),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog.once .secret`)))
	rotated := textOf(t, ctx, "dialog .secret")
	if !strings.HasPrefix(rotated, "whsec_") || rotated == secret {
		t.Fatalf("the new secret %q (the old one %q)", rotated, secret)
	}
	run(t, ctx, "close the new secret", chromedp.Click(chromedp.CSS(`dialog button:last-child`)), waitJS(`!document.querySelector("dialog")`))
	if html := pageHTML(t, ctx); strings.Contains(html, rotated) || strings.Contains(html, secret) {
		t.Fatal("a signing secret is still on the page after its dialog closed")
	}
	rc.mu.Lock()
	rc.secret = rotated
	rc.mu.Unlock()
	env2 := s.newEnv(t, "hooked again")
	rc.wait("environment.created", env2.ID, 10*time.Second)

	// An endpoint whose receiver redirects is disabled by the server,
	// saying why; the page shows it and enables it again.
	redirect := httptest.NewServer(http.RedirectHandler("https://example.com/", http.StatusFound))
	t.Cleanup(redirect.Close)
	moved, err := hooks.New(bg, anthropic.BetaOrganizationWebhookNewParams{URL: redirect.URL + "/moved", EnabledEvents: []string{"environment.created"}})
	if err != nil {
		t.Fatal(err)
	}
	s.newEnv(t, "redirected")
	waitUntil(t, "auto-disabled", func() bool {
		ep, err := hooks.Get(bg, moved.ID, anthropic.BetaOrganizationWebhookGetParams{})
		return err == nil && ep.State == "disabled"
	})
	movedRow := fmt.Sprintf(`tr[data-id=%q]`, moved.ID)
	run(t, ctx, "auto-disabled",
		chromedp.Reload(),
		waitJS(textIn(movedRow+" .badge", "auto-disabled")), waitJS(textIn(movedRow+" .wh-reason", "answered 302, a redirect")))
	shot(t, ctx, "webhooks")
	run(t, ctx, "enable the auto-disabled endpoint",
		chromedp.Click(chromedp.CSS(movedRow+" button.toggle")),
		waitJS(fmt.Sprintf(`document.querySelector(%q)?.dataset.state === "enabled"`, movedRow)),
		waitJS(`!document.querySelector(".wh-reason")`))
	if ep, err := hooks.Get(bg, moved.ID, anthropic.BetaOrganizationWebhookGetParams{}); err != nil || ep.State != "enabled" || ep.DisabledReason != "" {
		t.Fatalf("after Enable: %v, %v", ep.RawJSON(), err)
	}
	settled(t, ctx, tb, "webhooks actions")

	run(t, ctx, "delete",
		chromedp.Click(chromedp.CSS(row+" button.danger")),
		chromedp.WaitVisible(chromedp.CSS(`dialog.confirm`)),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(fmt.Sprintf(`!document.querySelector(%q)`, row)), waitJS(`!!document.querySelector(`+fmt.Sprintf("%q", movedRow)+`)`))
	_, err = hooks.Get(bg, id, anthropic.BetaOrganizationWebhookGetParams{})
	apiErr(t, err, 404, "not_found_error")

	// A narrow window: nothing scrolls sideways, the table neither.
	run(t, ctx, "narrow",
		chromedp.EmulateViewport(390, 800, chromedp.EmulateScale(2)),
		chromedp.Reload(),
		waitJS(textIn(movedRow, redirect.URL+"/moved")),
		waitJS(`document.documentElement.scrollWidth <= window.innerWidth`),
		waitJS(`[...document.querySelectorAll("main .table-wrap, main form")].every(e => e.scrollWidth <= e.clientWidth)`))
	run(t, ctx, "wide again", chromedp.EmulateViewport(1280, 900))

	// A read-only key sees the endpoints and changes nothing.
	ro := s.developer(t, "wrkspc_default", "ro-hooks", "read_only")
	signOut(t, ctx)
	signIn(t, ctx, base, devKey(ro))
	writes := `[...document.querySelectorAll("main button, main input, main fieldset")]`
	run(t, ctx, "read_only webhooks",
		chromedp.Navigate(base+"#/webhooks"), waitJS(textIn(movedRow, redirect.URL+"/moved")),
		waitJS(writes+`.length > 50 && `+writes+`.every(b => b.disabled && b.title.includes("read-only"))`),
		waitJS(textIn("form.webhook-new", "read-only")))
	settled(t, ctx, tb, "read_only webhooks")
}
