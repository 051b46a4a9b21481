package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/store/storetest"
	ma "github.com/reinsdev/reins/managedagents"
)

// countingStore records what each log read returned: its bytes of event
// JSON and the entries that had it.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	reads []logRead
}

type logRead struct {
	kind    string // "log" (ReadLogRaw) or "list" (ListEvents)
	bytes   int64
	entries int
}

func (s *countingStore) note(kind string, entries []store.Entry) {
	r := logRead{kind: kind}
	for _, e := range entries {
		if !e.Head() {
			r.bytes += int64(len(e.Raw))
			r.entries++
		}
	}
	s.mu.Lock()
	s.reads = append(s.reads, r)
	s.mu.Unlock()
}

func (s *countingStore) ReadLogRaw(ctx context.Context, id string, after int64, limit int, maxBytes int64) ([]store.Entry, error) {
	entries, err := s.Store.ReadLogRaw(ctx, id, after, limit, maxBytes)
	s.note("log", entries)
	return entries, err
}

func (s *countingStore) ReadViewRaw(ctx context.Context, id string, v store.View, after int64, limit int, maxBytes int64) ([]store.Entry, error) {
	entries, err := s.Store.ReadViewRaw(ctx, id, v, after, limit, maxBytes)
	s.note("log", entries)
	return entries, err
}

func (s *countingStore) ListEvents(ctx context.Context, id string, q store.EventQuery) ([]store.Entry, error) {
	entries, err := s.Store.ListEvents(ctx, id, q)
	s.note("list", entries)
	return entries, err
}

// maxRead is the most event JSON one read returned.
func (s *countingStore) maxRead() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.reads {
		n = max(n, r.bytes)
	}
	return n
}

// overRead returns the first read of kind that returned more than limit
// bytes of several events (a read over a budget is one event alone).
func (s *countingStore) overRead(kind string, limit int64) *logRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reads {
		if r.kind == kind && r.bytes > limit && r.entries > 1 {
			return &r
		}
	}
	return nil
}

// readsOver counts the reads of kind that returned more than limit bytes.
func (s *countingStore) readsOver(kind string, limit int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reads {
		if r.kind == kind && r.bytes > limit {
			n++
		}
	}
	return n
}

// logFixture is a SQLite store with one session.
type logFixture struct {
	store   *countingStore
	session string
}

func newLogFixture(t *testing.T) *logFixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := ma.Time(time.Now())
	sess, err := storetest.NewSession(context.Background(), st, ma.Session{ID: ids.New(ids.Session), Type: "session", Status: ma.StatusIdle,
		EnvironmentID: "env_x", Agent: ma.SessionAgent{ID: "agent_x"}, CreatedAt: now, UpdatedAt: now, Metadata: ma.Metadata{}})
	if err != nil {
		t.Fatal(err)
	}
	return &logFixture{store: &countingStore{Store: st}, session: sess.ID}
}

// append appends agent.message events with texts of these lengths and
// returns their ids.
func (f *logFixture) append(t *testing.T, lengths ...int) []string {
	t.Helper()
	var out []string
	for _, n := range lengths {
		ts := ma.Time(time.Now())
		ev := &ma.Event{Type: ma.EventAgentMessage, ProcessedAt: &ts, Content: []ma.ContentBlock{{Type: "text", Text: strings.Repeat("x", n)}}}
		if _, err := storetest.Append(context.Background(), f.store, f.session, ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.ID)
	}
	return out
}

// serve serves the fixture's store; the server shuts down with the test.
func (f *logFixture) serve(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	cfg.Store, cfg.Bus = f.store, bus.New()
	cfg.Auth = &Authenticator{Keys: f.store, Bootstrap: "sk-test"}
	s := New(cfg)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Stop(context.Background())
		hs.Close()
	})
	return s, hs.URL
}

// get does an authenticated GET and returns the response, body read.
func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("x-api-key", "sk-test")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// checkOverloaded checks a refusal for lack of budget: 503
// overloaded_error with retry-after.
func checkOverloaded(t *testing.T, what string, resp *http.Response, body []byte) {
	t.Helper()
	var env ma.ErrorEnvelope
	json.Unmarshal(body, &env)
	if resp.StatusCode != http.StatusServiceUnavailable || env.Error.Type != ma.ErrOverloaded || resp.Header.Get("retry-after") != "1" {
		t.Fatalf("%s: %d retry-after %q %s; want 503 overloaded_error with retry-after 1", what, resp.StatusCode, resp.Header.Get("retry-after"), body)
	}
}

// TestListPagesBoundedByBytes pages through events of 3 MiB, one of 9 MiB
// (more than a page) and two small ones the way the SDKs' auto-pagers do
// (a next_page means more): pages end before listPageBytes, the large
// event comes alone once the event budget has room for it (503 while it
// has not), and no read of the store returns more than a page but that
// event alone.
func TestListPagesBoundedByBytes(t *testing.T) {
	f := newLogFixture(t)
	const mib = 1 << 20
	evs := f.append(t, 3*mib, 3*mib, 3*mib, 3*mib, 3*mib, 9*mib, 100, 100)
	s, url := f.serve(t, Config{BudgetWait: 50 * time.Millisecond})

	var pages [][]string
	next := ""
	for {
		u := url + "/v1/sessions/" + f.session + "/events"
		if next != "" {
			u += "?page=" + next
		}
		resp, body := get(t, u)
		if resp.StatusCode != 200 {
			t.Fatalf("page %d: %d %s", len(pages)+1, resp.StatusCode, body)
		}
		var page struct {
			Data     []ma.Event `json:"data"`
			NextPage *string    `json:"next_page"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range page.Data {
			got = append(got, ev.ID)
		}
		pages = append(pages, got)
		if page.NextPage == nil || *page.NextPage == "" {
			break
		}
		next = *page.NextPage
	}
	want := [][]string{evs[0:2], evs[2:4], evs[4:5], evs[5:6], evs[6:8]}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	if r := f.store.overRead("list", listPageBytes); r != nil {
		t.Fatalf("a list read returned %d events of %d bytes, over the page's %d", r.entries, r.bytes, listPageBytes)
	}

	// The large event's page waits for the event budget.
	release, err := s.mem.events.acquire(t.Context(), s.cfg.EventBudget)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, url+"/v1/sessions/"+f.session+"/events?limit=1&order=desc")
	if resp.StatusCode != 200 {
		t.Fatalf("a small page while the event budget is taken: %d %s", resp.StatusCode, body)
	}
	first := cursor{Pos: 5, Order: "asc"}.encode()
	resp, body = get(t, url+"/v1/sessions/"+f.session+"/events?page="+*first)
	checkOverloaded(t, "the large event's page while the event budget is taken", resp, body)
	release()
	if resp, body = get(t, url+"/v1/sessions/"+f.session+"/events?page="+*first); resp.StatusCode != 200 {
		t.Fatalf("the large event's page once the budget is back: %d %s", resp.StatusCode, body)
	}
}

// sseFrame is one frame of a stream, its data's length only.
type sseFrame struct {
	id, event string
	size      int
}

// readFrames reads a stream's frames (pings left out) until it ends.
func readFrames(body io.Reader, out chan<- sseFrame) {
	br := bufio.NewReaderSize(body, 64<<10)
	var fr sseFrame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			close(out)
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			fr.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			fr.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			fr.size = len(line) - 6
		case line == "":
			if fr.event != "ping" {
				out <- fr
			}
			fr = sseFrame{}
		}
	}
}

// TestStreamReadsLargeEventsWithinBudget streams, from the store, an
// event larger than a stream's read between two small ones to five
// clients: it is sent, whole, only once the event budget has room for it,
// it is read once for the five, and no read of the store returned more
// than streamChunkBytes but that event alone.
func TestStreamReadsLargeEventsWithinBudget(t *testing.T) {
	f := newLogFixture(t)
	f.append(t, 100, 3<<20, 100)
	s, url := f.serve(t, Config{})
	release, err := s.mem.events.acquire(t.Context(), s.cfg.EventBudget)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	const clients = 5
	var streams []chan sseFrame
	for range clients {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", url+"/v1/sessions/"+f.session+"/events/stream", nil)
		req.Header.Set("x-api-key", "sk-test")
		req.Header.Set("Last-Event-ID", "0") // from the store: the ring starts empty
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		frames := make(chan sseFrame, 10)
		go readFrames(resp.Body, frames)
		streams = append(streams, frames)
	}
	next := func(frames chan sseFrame) sseFrame {
		t.Helper()
		select {
		case fr := <-frames:
			return fr
		case <-time.After(10 * time.Second):
			t.Fatal("no frame")
		}
		return sseFrame{}
	}
	for _, frames := range streams {
		if fr := next(frames); fr.id != "1" {
			t.Fatalf("first frame %+v, want event 1", fr)
		}
	}
	// Every stream waits for the one read of event 2.
	deadline := time.Now().Add(10 * time.Second)
	for waiting := 0; waiting < clients; {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams wait for event 2, want %d", waiting, clients)
		}
		time.Sleep(10 * time.Millisecond)
		s.mem.large.mu.Lock()
		if r := s.mem.large.m[largeKey{f.session, 2}]; r != nil {
			waiting = r.refs
		}
		s.mem.large.mu.Unlock()
	}
	for _, frames := range streams {
		select {
		case fr := <-frames:
			t.Fatalf("frame %+v sent while the event budget was taken", fr)
		default:
		}
	}
	release()
	for _, frames := range streams {
		if fr := next(frames); fr.id != "2" || fr.size < 3<<20 {
			t.Fatalf("frame %+v, want event 2 whole", fr)
		}
		if fr := next(frames); fr.id != "3" {
			t.Fatalf("frame %+v, want event 3", fr)
		}
	}
	if r := f.store.overRead("log", streamChunkBytes); r != nil {
		t.Fatalf("a log read returned %d events of %d bytes, over a stream's %d", r.entries, r.bytes, streamChunkBytes)
	}
	if n := f.store.readsOver("log", streamChunkBytes); n != 1 {
		t.Fatalf("event 2 was read %d times for %d streams, want once", n, clients)
	}
}

// TestBodyBudget sends content-carrying requests while the body budget is
// taken: they are refused (503 overloaded_error, retry-after) after
// BudgetWait, and handled once it has room; a body of unknown length
// counts as MaxBody.
func TestBodyBudget(t *testing.T) {
	f := newLogFixture(t)
	s, url := f.serve(t, Config{BodyBudget: 1 << 20, BudgetWait: 50 * time.Millisecond})
	post := func(path string, body io.Reader) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+path, body)
		req.Header.Set("x-api-key", "sk-test")
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	events := "/v1/sessions/" + f.session + "/events"
	const empty = `{"events":[]}` // refused by the handler (400) once admitted

	release, err := s.mem.bodies.acquire(t.Context(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := post(events, strings.NewReader(empty))
	checkOverloaded(t, "events sent while the body budget is taken", resp, body)
	resp, body = post("/v1/sessions", strings.NewReader(`{}`))
	checkOverloaded(t, "a session created while the body budget is taken", resp, body)
	release()

	// One byte taken: a small body fits, one of unknown length does not.
	release, err = s.mem.bodies.acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if resp, body = post(events, strings.NewReader(empty)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a small body with room in the budget: %d %s, want the handler's 400", resp.StatusCode, body)
	}
	resp, body = post(events, io.MultiReader(strings.NewReader(empty))) // chunked
	checkOverloaded(t, "a body of unknown length", resp, body)
}

// TestReclaimerReturnsMemoryAfterBursts drives a reclaimer: a burst over
// its threshold is followed by returns of memory, off the caller, after
// the settle time then at doubling intervals until the trail is over; a
// smaller burst by none; a burst under way when a return is due skips it;
// close stops a trail.
func TestReclaimerReturnsMemoryAfterBursts(t *testing.T) {
	var mu sync.Mutex
	var frees []time.Time
	r := newReclaimer()
	// Returns at 10 ms, then 200 and 400 ms later; the next would be
	// past the trail.
	r.burst, r.settle, r.every, r.trail = 100, 10*time.Millisecond, 200*time.Millisecond, 700*time.Millisecond
	r.free = func() {
		mu.Lock()
		frees = append(frees, time.Now())
		mu.Unlock()
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(frees)
	}
	trailOver := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return !r.running
	}
	waitTrail := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !trailOver() {
			if time.Now().After(deadline) {
				t.Fatal("the trail did not end")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	r.add(50) // under the threshold
	r.add(-50)
	if !trailOver() {
		t.Fatal("a burst under the threshold started a trail")
	}
	start := time.Now()
	r.add(60)
	r.add(60) // 120 held: a burst
	r.add(-120)
	waitTrail()
	if n := count(); n != 3 {
		t.Fatalf("%d returns after a burst, want 3 (settle, then every and twice every)", n)
	}
	if first := frees[0].Sub(start); first > time.Second {
		t.Fatalf("first return %s after the burst, want about the settle time", first)
	}
	for i := 1; i < len(frees); i++ {
		if gap := frees[i].Sub(frees[i-1]); gap < r.every {
			t.Fatalf("returns %d and %d are %s apart, want at least %s", i-1, i, gap, r.every)
		}
	}

	// A burst under way when the returns are due: they are skipped.
	r.add(200)
	r.add(-200)
	r.add(10) // under way, under the threshold: it does not restart the trail
	waitTrail()
	if n := count(); n != 3 {
		t.Fatalf("%d returns while a burst was under way, want none (3 in all)", n)
	}
	r.add(-10)

	r.every, r.trail = time.Hour, time.Hour
	r.add(200)
	r.add(-200)
	r.close() // during the settle time
	time.Sleep(50 * time.Millisecond)
	if n := count(); n != 3 {
		t.Fatalf("%d returns after close, want none (3 in all)", n)
	}
	r.add(200) // closed: no trail
	r.add(-200)
	if !trailOver() {
		t.Fatal("a trail started after close")
	}
}
