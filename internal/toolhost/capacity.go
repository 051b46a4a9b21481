package toolhost

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// capacity is how many cloud sessions' tools may be placed at once on
// this server: each placed session may run a sandbox, and the slots are
// what the machine's memory and processes allow (see
// SandboxConfig.capacity). A session takes a slot when its tools are
// placed and keeps it while it runs; an idle session keeps its slot only
// while nobody waits for one, and sessions wait for slots in the order
// they asked.
type capacity struct {
	size  int
	evict func(sessionID string) // ends an idle holder's placement

	mu      sync.Mutex        // guards the fields below
	holders map[string]uint64 // session → when it went idle (0: busy)
	idles   uint64            // counts idle marks, to evict the longest idle
	queue   []*slotWaiter     // FIFO
}

type slotWaiter struct {
	session string
	ready   chan struct{} // closed when the slot is the session's
}

func newCapacity(size int, evict func(sessionID string)) *capacity {
	return &capacity{size: max(size, 1), evict: evict, holders: map[string]uint64{}}
}

// take gives the session a slot. It returns nil when the session holds
// one now; otherwise a channel closed when a slot is set aside for it
// (call take again then), and why it waits.
func (c *capacity) take(sessionID string) (<-chan struct{}, string) {
	c.mu.Lock()
	var evicted []string
	defer func() {
		c.mu.Unlock()
		for _, id := range evicted {
			c.evict(id)
		}
	}()
	if _, ok := c.holders[sessionID]; ok {
		c.holders[sessionID] = 0
		return nil, ""
	}
	i := slices.IndexFunc(c.queue, func(w *slotWaiter) bool { return w.session == sessionID })
	if i < 0 {
		c.queue = append(c.queue, &slotWaiter{session: sessionID, ready: make(chan struct{})})
		evicted = c.grantLocked()
		if _, ok := c.holders[sessionID]; ok {
			c.holders[sessionID] = 0
			return nil, ""
		}
		i = len(c.queue) - 1
	}
	return c.queue[i].ready, fmt.Sprintf("all %d tool slots of this server are in use by running sessions; this session is number %d in line for the next one", c.size, i+1)
}

// idle marks the session's slot as one it may lose to a waiting session;
// a session that was waiting stops waiting.
func (c *capacity) idle(sessionID string) {
	c.mu.Lock()
	if since, ok := c.holders[sessionID]; ok && since == 0 {
		c.idles++
		c.holders[sessionID] = c.idles
	}
	c.dropWaiterLocked(sessionID)
	evicted := c.grantLocked()
	c.mu.Unlock()
	for _, id := range evicted {
		c.evict(id)
	}
}

// release frees the session's slot, or its place in line.
func (c *capacity) release(sessionID string) {
	c.mu.Lock()
	delete(c.holders, sessionID)
	c.dropWaiterLocked(sessionID)
	evicted := c.grantLocked()
	c.mu.Unlock()
	for _, id := range evicted {
		c.evict(id)
	}
}

func (c *capacity) dropWaiterLocked(sessionID string) {
	c.queue = slices.DeleteFunc(c.queue, func(w *slotWaiter) bool { return w.session == sessionID })
}

// grantLocked hands free slots, then the slots of idle sessions, to the
// waiting sessions in order. It returns the idle sessions that lost
// their slots, for the caller to evict outside the lock.
func (c *capacity) grantLocked() (evicted []string) {
	for len(c.queue) > 0 {
		if len(c.holders) >= c.size {
			idle := c.idleHolderLocked()
			if idle == "" {
				break
			}
			delete(c.holders, idle)
			evicted = append(evicted, idle)
		}
		w := c.queue[0]
		c.queue = c.queue[1:]
		c.holders[w.session] = 0
		close(w.ready)
	}
	return evicted
}

// idleHolderLocked returns the session idle for longest among those
// holding a slot, or "".
func (c *capacity) idleHolderLocked() string {
	oldest, since := "", uint64(0)
	for id, s := range c.holders {
		if s != 0 && (since == 0 || s < since) {
			oldest, since = id, s
		}
	}
	return oldest
}

// inUse returns the number of slots held and of sessions waiting.
func (c *capacity) inUse() (held, waiting int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.holders), len(c.queue)
}

// slots returns how many cloud sessions may hold a tool slot at once:
// what the budgets allow for sandboxes of the configured limits, and how
// that was reckoned, for the start-up log.
func (c SandboxConfig) slots() (int, string) {
	l := c.Limits.WithDefaults()
	mem, memFrom := c.MemoryBudget, "configured"
	if mem <= 0 {
		// A sandbox's memory limit is a cap, not what it uses (an idle
		// one, init and a shell, is 2–3 MiB): the default overcommits
		// twice, and the sandboxes' processes are the OOM killer's first
		// choice should they use it all at once.
		mem, memFrom = 2*machineMemory(), "twice this machine's memory"
	}
	procs, procsFrom := c.ProcessBudget, "configured"
	if procs <= 0 {
		procs, procsFrom = machineThreads()/2, "half this machine's thread limit"
	}
	n := max(1, min(int(mem/l.Memory), procs/l.Processes))
	return n, fmt.Sprintf("memory budget %d MiB (%s) / %d MiB per sandbox, process budget %d (%s) / %d per sandbox",
		mem>>20, memFrom, l.Memory>>20, procs, procsFrom, l.Processes)
}

// machineMemory returns the physical memory (MemTotal), or 8 GiB when it
// cannot be read.
func machineMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			var kib int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kib); err == nil && kib > 0 {
				return kib << 10
			}
		}
	}
	return 8 << 30
}

// machineThreads returns the kernel's thread limit (threads-max), or
// 32768 when it cannot be read.
func machineThreads() int {
	data, err := os.ReadFile("/proc/sys/kernel/threads-max")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 {
			return n
		}
	}
	return 32768
}
