package toolhost

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

type evictions struct {
	mu  sync.Mutex // guards the fields below
	ids []string
}

func (e *evictions) evict(id string) {
	e.mu.Lock()
	e.ids = append(e.ids, id)
	e.mu.Unlock()
}

func (e *evictions) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ids)
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestCapacityWaitersGetSlotsInOrder(t *testing.T) {
	var ev evictions
	c := newCapacity(2, ev.evict)
	for _, id := range []string{"a", "b"} {
		if w, _ := c.take(id); w != nil {
			t.Fatalf("%s waits with free slots", id)
		}
	}
	wc, why := c.take("c")
	wd, _ := c.take("d")
	if wc == nil || wd == nil || !strings.Contains(why, "number 1 in line") {
		t.Fatalf("c and d should wait, c first: %q", why)
	}
	if _, why := c.take("d"); !strings.Contains(why, "number 2 in line") {
		t.Fatalf("asking again keeps d's place: %q", why)
	}
	c.release("a")
	if !closed(wc) || closed(wd) {
		t.Fatal("the first slot freed goes to c, the first in line")
	}
	if w, _ := c.take("c"); w != nil {
		t.Fatal("c holds the slot set aside for it")
	}
	c.release("b")
	if !closed(wd) {
		t.Fatal("the next slot goes to d")
	}
	if len(ev.got()) != 0 {
		t.Fatalf("busy sessions were evicted: %v", ev.got())
	}
}

func TestCapacityIdleSessionsYieldLongestIdleFirst(t *testing.T) {
	var ev evictions
	c := newCapacity(2, ev.evict)
	c.take("a")
	c.take("b")
	c.idle("b")
	c.idle("a")
	if w, _ := c.take("c"); w != nil {
		t.Fatal("c waits although idle sessions hold slots")
	}
	if got := ev.got(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("evicted %v, want the longest idle, b", got)
	}
	// An idle session that needs its tools again takes its slot back
	// unless it lost it.
	if w, _ := c.take("a"); w != nil {
		t.Fatal("a lost its slot with nobody waiting")
	}
	w, _ := c.take("b")
	if w == nil {
		t.Fatal("b got a slot although a and c are busy")
	}
	// A waiting session that goes idle (interrupted) leaves the line.
	c.idle("b")
	c.release("a")
	if closed(w) {
		t.Fatal("a slot went to a session that left the line")
	}
	if held, waiting := c.inUse(); held != 1 || waiting != 0 {
		t.Fatalf("held %d, waiting %d; want 1, 0", held, waiting)
	}
}

func TestSandboxSlotsFromBudgets(t *testing.T) {
	cfg := SandboxConfig{MemoryBudget: 8 << 30, ProcessBudget: 10000}
	cfg.Limits.Memory, cfg.Limits.Processes = 1<<30, 512
	if n, how := cfg.slots(); n != 8 || !strings.Contains(how, "8192 MiB (configured)") {
		t.Fatalf("slots %d (%s), want 8 by memory", n, how)
	}
	cfg.ProcessBudget = 2048
	if n, _ := cfg.slots(); n != 4 {
		t.Fatalf("slots %d, want 4 by processes", n)
	}
	cfg.MemoryBudget = 1
	if n, _ := cfg.slots(); n != 1 {
		t.Fatalf("slots %d, want at least 1", n)
	}
}
