package memsync

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Set is one session's memory directories, synced around each of its
// tool calls: Pull before, Push after. It is safe for concurrent use
// (one sync at a time).
type Set struct {
	mu   sync.Mutex // guards dirs; one sync at a time
	dirs []*Dir
}

// NewSet returns the set of dirs.
func NewSet(dirs []*Dir) *Set { return &Set{dirs: dirs} }

// Pull brings the stores' changes into the directories. A store deleted
// since is no longer synced (its directory stays as it was), which
// problems say, as they say what could not be written.
func (s *Set) Pull(ctx context.Context, st Store) (problems []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := s.dirs[:0]
	for _, d := range s.dirs {
		p, err := d.Pull(ctx, st)
		problems = append(problems, p...)
		if errors.Is(err, ErrNotFound) {
			problems = append(problems, fmt.Sprintf("the memory store mounted at %s was deleted: what is written there is no longer saved.", d.Mount))
			continue
		}
		if err != nil {
			return problems, err
		}
		live = append(live, d)
	}
	s.dirs = live
	return problems, nil
}

// Push saves what the directories' files changed; problems are what
// could not be saved.
func (s *Set) Push(ctx context.Context, st Store) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var problems []string
	for _, d := range s.dirs {
		p, err := d.Push(ctx, st)
		problems = append(problems, p...)
		if err != nil {
			return problems, err
		}
	}
	return problems, nil
}

// Around runs a tool call between a pull and a push and returns the
// notice to add to its result ("" for none; otherwise the result is to
// be an error, for the model to fix what it says). A failed pull runs
// nothing: pulled is false and the notice says why.
func (s *Set) Around(ctx context.Context, st Store, run func()) (notice string, pulled bool) {
	gone, err := s.Pull(ctx, st)
	if err != nil {
		return "[reins] The session's memory stores could not be brought up to date, so the tool did not run: " + err.Error(), false
	}
	run()
	// The push outlives an interrupt of the call: what it wrote before
	// the cut is saved now, not at a next call that may never come.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushTimeout)
	defer cancel()
	problems, err := s.Push(pctx, st)
	problems = append(gone, problems...)
	if err != nil {
		problems = append(problems, fmt.Sprintf("What this call wrote under %s could not all be saved to the memory stores (%v); it is tried again after the next call.", ma.MemoryMountRoot, err))
	}
	return Notice(problems), true
}

// pushTimeout bounds the push after a tool call (the official worker
// bounds its last flush the same).
const pushTimeout = 30 * time.Second

// Notice is the text that tells the model of problems ("" for none).
func Notice(problems []string) string {
	if len(problems) == 0 {
		return ""
	}
	return "[reins] Memory store: " + strings.Join(problems, "\n[reins] Memory store: ")
}

// Unmounted is the notice of hands that cannot mount memory stores.
func Unmounted(why string) string {
	return "[reins] The session's memory stores are not mounted under " + ma.MemoryMountRoot + ": " + why + "."
}
