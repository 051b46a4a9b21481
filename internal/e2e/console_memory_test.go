package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// TestConsoleMemory drives the memory pages in headless Chromium: a store
// made from the form; its memories as a tree whose folders roll up with
// their counts; a memory opened with its content; its history showing
// who made each version (an API key, and a session linking to the
// session's page); a diff between two versions picked in the list; a
// version redacted after a confirmation; a path and content that look
// like markup shown as text; a read-only key seeing the pages with every
// write control disabled; and the store archived and deleted from the
// list.
func TestConsoleMemory(t *testing.T) {
	s := start(t, options{})
	bg := context.Background()
	ctx, tb := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)

	run(t, ctx, "create a store",
		chromedp.Navigate(base+"#/memory"), waitJS(textIn("main h1", "Memory stores")),
		chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "Team notes"),
		setValue(`textarea[name="description"]`, "What the team decided."),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		waitJS(textIn("main h1", "Team notes")), waitJS(textIn("main", "No memory yet.")))
	st := textOf(t, ctx, "main p.id")

	mems := s.client.Beta.MemoryStores.Memories
	put := func(path, content string) *anthropic.BetaManagedAgentsMemory {
		m, err := mems.New(bg, st, anthropic.BetaMemoryStoreMemoryNewParams{Path: path, Content: anthropic.String(content)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	style := put("/style.md", "one\ntwo\nthree\n")
	put("/projects/a/plan.md", "# Plan\n")
	put("/projects/a/risks.md", "none\n")
	put("/projects/b.md", "b\n")
	markup := "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 1\">"
	odd := put("/<em>odd.md", markup)
	if _, err := mems.Update(bg, style.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: st, Content: anthropic.String("one\n2\nthree\n")}); err != nil {
		t.Fatal(err)
	}
	// A session writes through its mount, as the tool host does.
	sess := s.newSession(t, s.newAgent(t, "scripted").ID, s.newEnv(t, "env").ID)
	final := "one\n2\nthree\nfour\n"
	if _, err := s.app.Store.UpdateMemory(bg, store.MemoryWrite{StoreID: st, MemoryID: style.ID, VersionID: ids.New(ids.MemoryVersion),
		Content: &final, Actor: &ma.Actor{Type: ma.ActorSession, SessionID: sess.ID}, At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	// The tree: folders rolled up with their counts, opened on a click.
	folder := func(p string) string { return fmt.Sprintf(`.mem-tree details[data-path=%q]`, p) }
	closed := func(p string) string { return fmt.Sprintf(`!document.querySelector(%q).open`, folder(p)) }
	file := func(p string) string { return fmt.Sprintf(`.mem-tree a.mem[data-path=%q]`, p) }
	run(t, ctx, "the tree",
		chromedp.Navigate(base+"#/memory"), waitJS(textIn("main h1", "Memory stores")),
		chromedp.Navigate(base+"#/memory/"+st), waitJS(textIn(".mem-nav h2", "5 memories")),
		waitJS(textIn(folder("/projects/")+" > summary", "projects/")), waitJS(textIn(folder("/projects/")+" > summary", "3 memories")),
		waitJS(shown(file("/style.md"))), waitJS(closed("/projects/")),
		waitJS(textIn(".changes", "session "+sess.ID)))
	run(t, ctx, "open a folder",
		chromedp.Click(chromedp.CSS(folder("/projects/")+" > summary")),
		waitJS(shown(file("/projects/b.md"))), waitJS(textIn(folder("/projects/a/")+" > summary", "2 memories")),
		waitJS(`!`+closed("/projects/")), waitJS(closed("/projects/a/")),
		chromedp.Click(chromedp.CSS(folder("/projects/a/")+" > summary")), chromedp.Click(chromedp.CSS(file("/projects/a/plan.md"))),
		waitJS(textIn(".mem-path", "/projects/a/plan.md")), waitJS(textIn(".mem-content", "# Plan")),
		// The page opened anew keeps the folders of the memory in view open.
		waitJS(`!`+closed("/projects/")), waitJS(`!`+closed("/projects/a/")),
		waitJS(fmt.Sprintf(`document.querySelector(%q).getAttribute("aria-current") === "page"`, file("/projects/a/plan.md"))))

	// A memory: its content and history, newest first.
	row := func(i int) string { return fmt.Sprintf(`table.versions tbody tr:nth-child(%d)`, i) }
	run(t, ctx, "open a memory",
		chromedp.Click(chromedp.CSS(file("/style.md"))),
		waitJS(textIn(".mem-path", "/style.md")),
		waitJS(fmt.Sprintf(`document.querySelector(".mem-content").textContent === %q`, final)),
		waitJS(`document.querySelectorAll("table.versions tbody tr").length === 3`),
		waitJS(textIn(row(1), "modified")), waitJS(textIn(row(1), "current")),
		waitJS(fmt.Sprintf(`!!document.querySelector(%q)`, row(1)+fmt.Sprintf(` .actor.session a[href="#/sessions/%s"]`, sess.ID))),
		waitJS(textIn(row(2), "API key key_")), waitJS(textIn(row(3), "created")))
	vers := evalJS[[]string](t, ctx, `[...document.querySelectorAll("table.versions tbody tr")].map(r => r.dataset.id)`)

	// The diff: the last two versions at first, then from the first.
	run(t, ctx, "diff",
		waitJS(textIn(".mem-diff .diff .add", "+ four")), waitJS(`!document.querySelector(".mem-diff .diff .del")`),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name="mem-from"][value=%q]`, vers[2]))),
		waitJS(textIn(".mem-diff .diff .del", "- two")), waitJS(textIn(".mem-diff .diff .add", "+ 2")), waitJS(textIn(".mem-diff .diff .add", "+ four")),
		waitJS(textIn(".mem-diff", "From "+vers[2]+" to "+vers[0])))
	shot(t, ctx, "memory")

	// The session actor links to the session.
	run(t, ctx, "the session's page",
		chromedp.Click(chromedp.CSS(row(1)+" .actor.session a")), waitJS(textIn(".conn", "live")),
		chromedp.NavigateBack(), waitJS(textIn(".mem-path", "/style.md")))

	// Redaction, after a confirmation: the content of the first version
	// is gone, the version stays listed, a diff with it says so.
	redact := row(3) + " button.danger"
	run(t, ctx, "redact: cancel",
		waitJS(shown(redact)), chromedp.Click(chromedp.CSS(redact)), waitJS(shown("dialog.confirm")),
		waitJS(textIn("dialog.confirm", "Redact version "+vers[2])),
		chromedp.Click(chromedp.CSS(`dialog.confirm button:not(.danger)`)), waitJS(`!document.querySelector("dialog")`))
	if v, err := s.client.Beta.MemoryStores.MemoryVersions.Get(bg, vers[2], anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st}); err != nil || !v.RedactedAt.IsZero() {
		t.Fatalf("a cancelled redaction redacted: %v %v", v, err)
	}
	run(t, ctx, "redact",
		chromedp.Click(chromedp.CSS(redact)), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(textIn(row(3), "redacted")), waitJS(textIn(row(3), "by API key key_")),
		waitJS(`document.querySelectorAll("table.versions tbody tr").length === 3`),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name="mem-from"][value=%q]`, vers[2]))),
		waitJS(textIn(".mem-diff", "Version "+vers[2]+" was redacted")))
	v, err := s.client.Beta.MemoryStores.MemoryVersions.Get(bg, vers[2], anthropic.BetaMemoryStoreMemoryVersionGetParams{MemoryStoreID: st})
	if err != nil || v.RedactedAt.IsZero() || v.Content != "" {
		t.Fatalf("the version after the redaction: %+v %v", v, err)
	}

	// Markup in a path and a content is text.
	run(t, ctx, "markup",
		chromedp.Click(chromedp.CSS(file("/<em>odd.md"))),
		waitJS(textIn(".mem-path", "/<em>odd.md")),
		waitJS(fmt.Sprintf(`document.querySelector(".mem-content").textContent === %q`, markup)))
	if n := evalJS[int](t, ctx, `document.querySelectorAll("main em, main img, main script").length`); n != 0 || evalJS[bool](t, ctx, `!!window.pwned`) {
		t.Errorf("markup from the API became %d elements (pwned %v)", n, evalJS[bool](t, ctx, `!!window.pwned`))
	}
	settled(t, ctx, tb, "memory store")

	// A read-only key reads everything and changes nothing.
	ro := s.developer(t, "wrkspc_default", "ro-memory", "read_only")
	signOut(t, ctx)
	signIn(t, ctx, base, devKey(ro))
	writes := `[...document.querySelectorAll("main button")].filter(b => b.textContent !== "Cancel")`
	run(t, ctx, "read_only memory",
		chromedp.Navigate(base+"#/memory/"+st+"/"+odd.ID), waitJS(textIn(".mem-path", "/<em>odd.md")),
		chromedp.Navigate(base+"#/memory/"+st+"/"+style.ID), waitJS(`document.querySelectorAll("table.versions tbody tr").length === 3`),
		waitJS(textIn(".mem-diff .diff .add", "+ four")),
		waitJS(writes+`.length === 2 && `+writes+`.every(b => b.disabled && b.title.includes("read-only"))`),
		chromedp.Navigate(base+"#/memory"), waitJS(textIn("main table", "Team notes")),
		waitJS(writes+`.length === 3 && `+writes+`.every(b => b.disabled && b.title.includes("read-only"))`),
		waitJS(`document.querySelector('input[name="name"]').disabled`))
	settled(t, ctx, tb, "read_only memory")
	signOut(t, ctx)
	signIn(t, ctx, base, s.key)

	// Archive, then delete, from the list, each after a confirmation.
	storeRow := fmt.Sprintf(`tr[data-id=%q]`, st)
	run(t, ctx, "archive",
		chromedp.Navigate(base+"#/memory"), waitJS(textIn(storeRow, "Team notes")), waitJS(textIn(storeRow, "What the team decided.")),
		chromedp.Click(chromedp.CSS(storeRow+` button:not(.danger)`)), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(`!document.querySelector(`+fmt.Sprintf("%q", storeRow)+`)`),
		chromedp.Click(chromedp.CSS(`#f-mem-archived`)), waitJS(textIn(storeRow+" .badge", "archived")))
	run(t, ctx, "delete",
		chromedp.Click(chromedp.CSS(storeRow+` button.danger`)), waitJS(shown("dialog.confirm")),
		chromedp.Click(chromedp.CSS(`dialog.confirm button.danger`)),
		waitJS(`!document.querySelector(`+fmt.Sprintf("%q", storeRow)+`)`))
	if _, err := s.client.Beta.MemoryStores.Get(bg, st, anthropic.BetaMemoryStoreGetParams{}); err == nil {
		t.Error("the store is still there after its deletion")
	}
	settled(t, ctx, tb, "memory stores")
}
