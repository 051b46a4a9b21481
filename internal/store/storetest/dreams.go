package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// newDream is a pending dream over the memory store storeID; with
// update set it updates that store in place.
func newDream(storeID string, update bool, at time.Time) store.Dream {
	d := store.Dream{Dream: ma.Dream{ID: ids.New(ids.Dream), Type: "dream", Status: ma.DreamPending,
		Inputs: []ma.DreamInput{{Type: ma.DreamInputMemoryStore, MemoryStoreID: storeID},
			{Type: ma.DreamInputSessions, SessionIDs: []string{"sesn_a"}}},
		Outputs: []ma.DreamOutput{}, Model: ma.DreamModel{ID: "scripted", Speed: "standard"},
		OutputBehavior: ma.DreamOutputBehavior{Type: ma.DreamCreateNew}, CreatedAt: ma.Time(at)},
		Active: true, Plan: store.DreamPlan{SessionID: ids.New(ids.Session), APIKeyID: "apikey_1"}}
	if update {
		d.OutputBehavior = ma.DreamOutputBehavior{Type: ma.DreamUpdateExisting, MemoryStoreID: storeID}
	}
	return d
}

func dreamIDs(items []store.Item[ma.Dream]) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Value.ID)
	}
	return out
}

// testDreams: a dream is stored with its plan, read back, updated
// (status, plan, archive) and listed newest first with the status,
// archive and exclusive created_at filters, page by page.
func testDreams(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	ms := newMemoryStore(t, ctx, s, "dreamed")
	base := time.Now().Add(-time.Hour)
	var made []store.Dream
	for i := range 4 {
		d := newDream(ms.ID, false, base.Add(time.Duration(i)*time.Minute))
		must(t, s.CreateDream(ctx, d))
		made = append(made, d)
	}
	got, err := s.GetDream(ctx, made[0].ID)
	if err != nil || got.Status != ma.DreamPending || !got.Active || got.Plan != made[0].Plan || got.WorkspaceID != store.DefaultWorkspace ||
		got.MemoryStoreInput() != ms.ID || !slices.Equal(got.SessionInputs(), []string{"sesn_a"}) {
		t.Fatalf("GetDream = %+v, %v", got, err)
	}
	if _, err := s.GetDream(ctx, "drm_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing dream: %v", err)
	}
	if err := s.CreateDream(ctx, made[0]); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	sid := "sesn_run"
	up, err := s.UpdateDream(ctx, made[1].ID, func(d *store.Dream) error {
		d.Status, d.SessionID, d.Plan.StoreID = ma.DreamRunning, &sid, "memstore_x"
		return nil
	})
	if err != nil || up.Status != ma.DreamRunning || *up.SessionID != sid {
		t.Fatalf("UpdateDream = %+v, %v", up, err)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateDream(ctx, made[1].ID, func(d *store.Dream) error { d.Status = ma.DreamFailed; return refused }); err != refused {
		t.Fatalf("fn's error: %v", err)
	}
	if got, _ := s.GetDream(ctx, made[1].ID); got.Status != ma.DreamRunning || got.Plan.StoreID != "memstore_x" {
		t.Fatalf("after a refused update: %+v", got)
	}
	ended := ma.Time(time.Now())
	if _, err := s.UpdateDream(ctx, made[2].ID, func(d *store.Dream) error {
		d.Status, d.Active, d.EndedAt, d.ArchivedAt = ma.DreamCompleted, false, &ended, &ended
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	list := func(q store.DreamQuery) []string {
		t.Helper()
		if q.Limit == 0 {
			q.Limit = 20
		}
		q.Desc = true
		items, err := s.ListDreams(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return dreamIDs(items)
	}
	want := []string{made[3].ID, made[1].ID, made[0].ID}
	if got := list(store.DreamQuery{}); !slices.Equal(got, want) {
		t.Fatalf("list = %v, want newest first without the archived one %v", got, want)
	}
	if got := list(store.DreamQuery{ListQuery: store.ListQuery{IncludeArchived: true}}); len(got) != 4 || got[1] != made[2].ID {
		t.Fatalf("with archived = %v", got)
	}
	if got := list(store.DreamQuery{Statuses: []string{ma.DreamRunning, ma.DreamCompleted}, ListQuery: store.ListQuery{IncludeArchived: true}}); !slices.Equal(got, []string{made[2].ID, made[1].ID}) {
		t.Fatalf("running or completed = %v", got)
	}
	gt, lt := base, base.Add(3*time.Minute) // made[0] and made[3] are on the bounds
	if got := list(store.DreamQuery{CreatedGT: &gt, CreatedLT: &lt}); !slices.Equal(got, []string{made[1].ID}) {
		t.Fatalf("created in (%v, %v) = %v, want the bounds excluded", gt, lt, got)
	}
	items, err := s.ListDreams(ctx, store.DreamQuery{ListQuery: store.ListQuery{Desc: true, Limit: 2}})
	if err != nil || len(items) != 2 {
		t.Fatalf("first page = %v, %v", dreamIDs(items), err)
	}
	if got := list(store.DreamQuery{ListQuery: store.ListQuery{After: items[1].Pos}}); !slices.Equal(got, []string{made[0].ID}) {
		t.Fatalf("second page = %v", got)
	}
}

// testDreamConflicts: of concurrent update_existing dreams on one store
// exactly one is stored, the others get a *DreamConflictError naming it;
// a create_new dream on the store and an update_existing one on another
// store are not in the way; once the winner is no longer active another
// may start.
func testDreamConflicts(t *testing.T, s store.Store) {
	ctx := store.WithWorkspace(context.Background(), store.DefaultWorkspace)
	ms := newMemoryStore(t, ctx, s, "contended")
	other := newMemoryStore(t, ctx, s, "other")
	const n = 6
	errs := make([]error, n)
	dreams := make([]store.Dream, n)
	var wg sync.WaitGroup
	for i := range n {
		dreams[i] = newDream(ms.ID, true, time.Now())
		wg.Go(func() { errs[i] = s.CreateDream(ctx, dreams[i]) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("dreams %d and %d both stored", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no dream stored: %v", errs)
	}
	for i, err := range errs {
		var dc *store.DreamConflictError
		if i != winner && (!errors.As(err, &dc) || dc.DreamID != dreams[winner].ID || dc.StoreID != ms.ID || !errors.Is(err, store.ErrConflict)) {
			t.Fatalf("loser %d: %v", i, err)
		}
	}
	must(t, s.CreateDream(ctx, newDream(ms.ID, false, time.Now())))
	must(t, s.CreateDream(ctx, newDream(other.ID, true, time.Now())))
	// Ended but still stopping: still in the way.
	if _, err := s.UpdateDream(ctx, dreams[winner].ID, func(d *store.Dream) error { d.Status = ma.DreamCanceled; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDream(ctx, newDream(ms.ID, true, time.Now())); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("while the canceled dream is active: %v", err)
	}
	if _, err := s.UpdateDream(ctx, dreams[winner].ID, func(d *store.Dream) error { d.Active = false; return nil }); err != nil {
		t.Fatal(err)
	}
	must(t, s.CreateDream(ctx, newDream(ms.ID, true, time.Now())))
}

// testDreamClaims: an owner claims every active dream of every
// workspace; another owner gets none while the claims live and all of
// them once they lapse; the first owner's claims renew; an inactive
// dream is never claimed.
func testDreamClaims(t *testing.T, s store.Store) {
	bg := context.Background()
	ctxA, ctxB := store.WithWorkspace(bg, store.DefaultWorkspace), store.WithWorkspace(bg, "wrkspc_b")
	a, b := newDream("memstore_a", false, time.Now()), newDream("memstore_b", false, time.Now())
	done := newDream("memstore_c", false, time.Now())
	done.Active, done.Status = false, ma.DreamCompleted
	must(t, s.CreateDream(ctxA, a))
	must(t, s.CreateDream(ctxB, b))
	must(t, s.CreateDream(ctxA, done))
	claimed := func(owner string, ttl time.Duration) []string {
		t.Helper()
		ds, err := s.ClaimDreams(bg, owner, ttl)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range ds {
			if d.Owner != owner {
				t.Fatalf("claimed dream %s has owner %q, want %q", d.ID, d.Owner, owner)
			}
			out = append(out, d.ID+"@"+d.WorkspaceID)
		}
		return out
	}
	want := []string{a.ID + "@" + store.DefaultWorkspace, b.ID + "@wrkspc_b"}
	if got := claimed("one", time.Minute); !slices.Equal(got, want) {
		t.Fatalf("one claims %v, want %v", got, want)
	}
	if got := claimed("two", time.Minute); len(got) != 0 {
		t.Fatalf("two claims %v while one's claims live", got)
	}
	if got := claimed("one", 50*time.Millisecond); !slices.Equal(got, want) {
		t.Fatalf("one renews %v", got)
	}
	time.Sleep(100 * time.Millisecond)
	if got := claimed("two", time.Minute); !slices.Equal(got, want) {
		t.Fatalf("two takes over %v after one's claims lapsed", got)
	}
	if got, _ := s.GetDream(ctxB, b.ID); got.Owner != "two" {
		t.Fatalf("owner of %s = %q", b.ID, got.Owner)
	}
	if got := claimed("one", time.Minute); len(got) != 0 {
		t.Fatalf("one claims %v back", got)
	}
}
