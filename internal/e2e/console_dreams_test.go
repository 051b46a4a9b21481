package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
)

// TestConsoleDreams drives the dreams page in headless Chromium: a dream
// started from the form (a memory store whose name is markup, two
// sessions picked, the scripted model, instructions that script the dream
// agent) appears in the list and reaches completed with its output store
// (linked, as the input store is, to its memory page, which shows the
// copied memories) and its session, whose link opens the session's page
// with the dream agent's work; a completed dream offers archive, not cancel. A running
// dream offers cancel, not archive; canceled from the page after a
// confirmation, it offers archive; archived, it leaves the list and comes
// back with "Include archived". Markup from the API stays text. A
// read-only key sees the dreams with the form and every button disabled.
func TestConsoleDreams(t *testing.T) {
	s := start(t, options{})
	bg := context.Background()
	k := newDreamKit(t, s)
	markup := `<img src=x onerror="window.pwned = 1">notes`
	if _, err := s.client.Beta.MemoryStores.Update(bg, k.store, anthropic.BetaMemoryStoreUpdateParams{Name: anthropic.String(markup)}); err != nil {
		t.Fatal(err)
	}
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)

	script := `@tool bash {"command":"cd /mnt/memory/*/ && echo neovim > prefs/editor.md && cat prefs/editor.md"}` + "\n@then dreamt <b>well</b>"
	box := func(id string) string { return fmt.Sprintf(`input[name="dream-session"][value=%q]`, id) }
	run(t, ctx, "create",
		chromedp.Navigate(base+"#/dreams"), waitJS(textIn("main h1", "Dreams")), waitJS(textIn("main", "No dream yet.")),
		waitJS(fmt.Sprintf(`document.querySelector('select[name="dream-store"]').value === %q`, k.store)),
		waitJS(textIn(`select[name="dream-store"] option`, markup)),
		chromedp.Click(chromedp.CSS(box(k.sessions[0]))), chromedp.Click(chromedp.CSS(box(k.sessions[1]))),
		setValue(`input[name="dream-model"]`, "scripted"), setValue(`textarea[name="dream-instructions"]`, script),
		chromedp.Click(chromedp.CSS(`form.dream-new button[type="submit"]`)),
		waitJS(`!!document.querySelector("tr[data-id]")`))
	id := evalJS[string](t, ctx, `document.querySelector("tr[data-id]").dataset.id`)
	rowSel := fmt.Sprintf(`tr[data-id=%q]`, id)
	run(t, ctx, "completed",
		waitJS(fmt.Sprintf(`document.querySelector(%q).dataset.status === "completed"`, rowSel)),
		waitJS(textIn(rowSel+" .badge", "completed")))
	d, err := s.client.Beta.Dreams.Get(bg, id, anthropic.BetaDreamGetParams{})
	if err != nil || d.Status != anthropic.BetaDreamStatusCompleted || len(d.Outputs) != 1 || d.Instructions != script || len(d.Inputs[1].SessionIDs) != 2 {
		t.Fatalf("the dream made from the form: %v, %v", d.RawJSON(), err)
	}
	out := d.Outputs[0].MemoryStoreID
	run(t, ctx, "the completed row",
		waitJS(textIn(rowSel+" td:nth-child(3)", markup)), waitJS(textIn(rowSel+" td:nth-child(3)", "2 sessions")),
		waitJS(textIn(rowSel+" td:nth-child(4)", out)), waitJS(textIn(rowSel+" td:nth-child(4)", "(dream "+id+")")),
		waitJS(fmt.Sprintf(`document.querySelector(%q).getAttribute("href") === "#/memory/%s"`, rowSel+" td:nth-child(4) a.store", out)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).getAttribute("href") === "#/memory/%s"`, rowSel+" td:nth-child(3) a.store", k.store)),
		waitJS(fmt.Sprintf(`document.querySelector(%q).getAttribute("href") === "#/sessions/%s"`, rowSel+" a.dream-session", d.SessionID)),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(b => b.textContent).join() === "Archive"`, rowSel+" button")),
		chromedp.Click(chromedp.CSS(rowSel+" details.instructions summary")), waitJS(textIn(rowSel+" details.instructions pre", "<b>well</b>")))
	if n := evalJS[int](t, ctx, `document.querySelectorAll("main img, main b").length`); n != 0 || evalJS[bool](t, ctx, `!!window.pwned`) {
		t.Errorf("markup from the API became %d elements (pwned %v)", n, evalJS[bool](t, ctx, `!!window.pwned`))
	}
	settled(t, ctx, tb, "dreams")

	run(t, ctx, "the output store's page",
		chromedp.Click(chromedp.CSS(rowSel+" td:nth-child(4) a.store")), waitJS(textIn("main h1", "(dream "+id+")")),
		waitJS(textIn(".mem-tree", "prefs/")),
		chromedp.NavigateBack(), waitJS(textIn(rowSel+" .badge", "completed")))
	run(t, ctx, "the dream's session",
		chromedp.Click(chromedp.CSS(rowSel+" a.dream-session")), waitJS(textIn(".conn", "live")),
		waitJS(textIn(".transcript", "Instructions from the person who started this dream")), waitJS(textIn(".transcript", "neovim")),
		waitJS(textIn(".transcript", "dreamt <b>well</b>")),
		chromedp.NavigateBack(), waitJS(textIn(rowSel+" .badge", "completed")))

	// A dream that runs until canceled from the page.
	long, err := s.client.Beta.Dreams.New(bg, k.params("@sleep 60s", anthropic.BetaOutputBehaviorParamOfUpdateExisting(k.store)))
	if err != nil {
		t.Fatal(err)
	}
	longSel := fmt.Sprintf(`tr[data-id=%q]`, long.ID)
	run(t, ctx, "running",
		waitJS(fmt.Sprintf(`document.querySelector(%q)?.dataset.status === "running"`, longSel)),
		waitJS(textIn(longSel+" td:nth-child(4)", "updates the input")),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(b => b.textContent).join() === "Cancel"`, longSel+" button")))
	run(t, ctx, "cancel: no",
		chromedp.Click(chromedp.CSS(longSel+" button.danger")), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button:not(.danger)`)), waitJS(`!document.querySelector("dialog")`))
	if d, err := s.client.Beta.Dreams.Get(bg, long.ID, anthropic.BetaDreamGetParams{}); err != nil || d.Status != anthropic.BetaDreamStatusRunning {
		t.Fatalf("after a cancel called off: %v, %v", d.Status, err)
	}
	run(t, ctx, "cancel",
		chromedp.Click(chromedp.CSS(longSel+" button.danger")), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(fmt.Sprintf(`document.querySelector(%q)?.dataset.status === "canceled"`, longSel)),
		waitJS(fmt.Sprintf(`[...document.querySelectorAll(%q)].map(b => b.textContent).join() === "Archive"`, longSel+" button")))
	if d, err := s.client.Beta.Dreams.Get(bg, long.ID, anthropic.BetaDreamGetParams{}); err != nil || d.Status != anthropic.BetaDreamStatusCanceled {
		t.Fatalf("after cancel: %v, %v", d.Status, err)
	}
	run(t, ctx, "archive",
		chromedp.Click(chromedp.CSS(longSel+" button")), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(`!document.querySelector(`+fmt.Sprintf("%q", longSel)+`)`), waitJS(`!!document.querySelector(`+fmt.Sprintf("%q", rowSel)+`)`),
		chromedp.Click(chromedp.CSS(`#f-dreams-archived`)), waitJS(textIn(longSel+" .badge", "archived")),
		waitJS(fmt.Sprintf(`document.querySelectorAll(%q).length === 0`, longSel+" button")))
	if d, err := s.client.Beta.Dreams.Get(bg, long.ID, anthropic.BetaDreamGetParams{}); err != nil || d.ArchivedAt.IsZero() {
		t.Fatalf("after archive: %v, %v", d, err)
	}
	settled(t, ctx, tb, "dreams after cancel and archive")

	// A read-only key looks only.
	ro := s.developer(t, "wrkspc_default", "ro-dreams", "read_only")
	signOut(t, ctx)
	signIn(t, ctx, base, devKey(ro))
	writes := `[...document.querySelectorAll("main button")]`
	run(t, ctx, "read_only dreams",
		chromedp.Navigate(base+"#/dreams"), waitJS(textIn(rowSel+" .badge", "completed")),
		waitJS(writes+`.length === 2 && `+writes+`.every(b => b.disabled && b.title.includes("read-only"))`),
		waitJS(`[...document.querySelectorAll("form.dream-new input, form.dream-new select, form.dream-new textarea")].every(e => e.disabled)`),
		waitJS(textIn("form.dream-new", "read-only")))
	settled(t, ctx, tb, "read_only dreams")
}
