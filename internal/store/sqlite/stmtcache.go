package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxStmts bounds the statements a cache keeps: the store's statements
// are a fixed set of a few hundred texts, and a text past the bound (one
// built with a varying number of placeholders, say) runs unprepared.
const maxStmts = 1024

// stmtCache keeps a pool's prepared statements by their text. SQLite
// spends about as long compiling a statement as running it: without the
// cache, compiling took a fifth of the server's CPU in bench/control.
//
// The readers' pool prepares a statement when it is first asked for. The
// writer's pool has a single connection, which its transaction holds
// while a statement is asked for, so a statement cannot be prepared on
// the pool then: a miss is noted, runs unprepared, and the writer
// prepares the noted texts between batches (prepareNoted).
type stmtCache struct {
	db  *sql.DB
	max int // maxStmts, but in tests

	mu       sync.Mutex // guards the fields below
	stmts    map[string]*sql.Stmt
	noted    map[string]bool // the writer's misses, to prepare between batches
	prepared int             // statements prepared, for the tests
	closed   bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, max: maxStmts, stmts: map[string]*sql.Stmt{}, noted: map[string]bool{}}
}

// lookup returns the prepared statement of query, or nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// note records a miss of the writer's, for prepareNoted.
func (c *stmtCache) note(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stmts)+len(c.noted) < c.max {
		c.noted[query] = true
	}
}

// get returns the prepared statement of query, preparing it on a miss;
// nil (run it unprepared) when the cache is full or the preparation
// failed (the statement then fails on its own, with its error).
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	if s := c.lookup(query); s != nil {
		return s
	}
	c.mu.Lock()
	full := len(c.stmts) >= c.max || c.closed
	c.mu.Unlock()
	if full {
		return nil
	}
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	return c.keep(query, s)
}

// keep adds s as the statement of query, unless another was kept
// meanwhile (or the cache closed): then s is closed and the kept one
// returned.
func (c *stmtCache) keep(query string, s *sql.Stmt) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prepared++
	if old := c.stmts[query]; old != nil || c.closed {
		s.Close()
		return old
	}
	c.stmts[query] = s
	return s
}

// prepareNoted prepares the texts noted since its last call. The writer
// calls it between batches, when its pool's one connection is free; a
// text that fails to prepare is dropped.
func (c *stmtCache) prepareNoted(ctx context.Context) {
	c.mu.Lock()
	if len(c.noted) == 0 {
		c.mu.Unlock()
		return
	}
	noted := c.noted
	c.noted = map[string]bool{}
	c.mu.Unlock()
	for query := range noted {
		if s, err := c.db.PrepareContext(ctx, query); err == nil {
			c.keep(query, s)
		}
	}
}

// close closes the kept statements; later misses are not kept.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, s := range c.stmts {
		errs = append(errs, s.Close())
	}
	clear(c.stmts)
	return errors.Join(errs...)
}

// counts returns how many statements c keeps and how many it prepared.
func (c *stmtCache) counts() (kept, prepared int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stmts), c.prepared
}
