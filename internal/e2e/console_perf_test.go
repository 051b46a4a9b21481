//go:build consoleperf

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/chromedp/chromedp"
)

// TestConsolePerf measures the console on a long transcript (400 turns,
// about 2,800 events) and a list over 10,000 sessions. It prints figures
// and asserts only that each page appears; it is built with the
// consoleperf tag only (half a minute goes into seeding):
//
//	go test -tags consoleperf -race -run TestConsolePerf -v ./internal/e2e/
func TestConsolePerf(t *testing.T) {
	s := start(t, options{})
	ctx, _ := browser(t)
	base := s.url + "/console/"
	signIn(t, ctx, base, s.key)
	a := s.newAgent(t, "scripted")
	env := s.newEnv(t, "env").ID
	sess := s.newSession(t, a.ID, env)
	for i := range 400 {
		if _, err := s.client.Beta.Sessions.Events.Send(context.Background(), sess.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{userMessage(fmt.Sprintf("msg %d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		evs, err := s.client.Beta.Sessions.Events.List(context.Background(), sess.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1), Order: "desc", Types: []anthropic.BetaManagedAgentsSessionEventType{"agent.message"}})
		if err == nil && len(evs.Data) > 0 && strings.Contains(evs.Data[0].RawJSON(), "msg 399") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("slow")
		}
		time.Sleep(500 * time.Millisecond)
	}
	start := time.Now()
	run(t, ctx, "open", chromedp.Navigate(base+"#/sessions/"+sess.ID), waitJS(textIn(".ev.agent", "You said: msg 399")))
	t.Logf("transcript rendered in %v", time.Since(start))
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 625 {
				ts := time.Now().UTC().Format(time.RFC3339Nano)
				_, err := storetest.NewSession(context.Background(), s.app.Store, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle, EnvironmentID: env,
					Title: fmt.Sprintf("bulk %d-%d", g, i), Agent: ma.SessionAgent{ID: a.ID, Version: 1}, CreatedAt: ts, UpdatedAt: ts, Metadata: ma.Metadata{}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("10000 sessions seeded in %v", time.Since(t0))
	start = time.Now()
	run(t, ctx, "list", chromedp.Navigate(base+"#/sessions"), waitJS(`document.querySelectorAll("table.sessions tbody tr").length === 25`))
	t.Logf("list rendered in %v", time.Since(start))
	start = time.Now()
	run(t, ctx, "page 2", chromedp.Click(chromedp.CSS(".pager button:last-child")), waitJS(textIn("table.sessions", "bulk")), chromedp.Sleep(0))
	t.Logf("next page in %v", time.Since(start))
	start = time.Now()
	run(t, ctx, "filter", setValue(`select[name="status"]`, "running"), waitJS(textIn("table.sessions", "No sessions match.")))
	t.Logf("status filter over 10,000 in %v", time.Since(start))
}
