// Package store defines the single source of truth of reins: API keys,
// agents (immutable versions), environments, sessions and each session's
// append-only event log.
//
// Every mutation of a session goes through Store.UpdateSession: one
// transaction that reads the session row, appends events with the next
// gap-free sequence numbers and writes the row back; the writes of the
// process that runs a session carry the fencing token of its lease
// (Leases, WithFence), so a stale owner cannot append. The backends, sqlite
// and postgres, are drivers of one implementation (store/internal/sqlstore)
// and pass the conformance suite in store/storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// Errors a Store returns; match them with errors.Is.
var (
	// ErrNotFound: no object with that id.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict: a uniqueness or optimistic-concurrency check failed.
	ErrConflict = errors.New("store: conflict")
	// ErrKeyRecorded: the outcome of a request could not be recorded,
	// its scope holds its Idempotency-Key already; the change it went
	// with is rolled back.
	ErrKeyRecorded = errors.New("store: idempotency key already recorded")
	// ErrUnavailable: the database could not be reached or could not
	// write (a connection lost, the server restarting, a disk full, a
	// lock another connection held past the busy or lock timeout). It
	// is transient: the same operation may succeed later. A write that
	// failed with it may still have committed (its connection was lost
	// during the commit): read before writing again.
	ErrUnavailable = errors.New("store: database unavailable")
	// ErrFull: the database's storage is full; it matches ErrUnavailable
	// too.
	ErrFull = fmt.Errorf("store: storage full: %w", ErrUnavailable)
)

// Store is the persistence interface every backend implements.
type Store interface {
	Keys
	EnvironmentKeys
	Machines
	Work
	Vaults
	MemoryStores
	Dreams
	Deployments
	Agents
	Environments
	Sessions
	Leases
	Replicas
	Files
	Skills
	ToolCalls
	Idempotency
	RepositoryTokens
	SessionTokens
	Workspaces
	Webhooks
	KeyAdmin
	Audit
	// CheckWrite commits a small write and reports whether the database
	// takes writes now (ErrUnavailable, ErrFull when it does not): the
	// server's readiness.
	CheckWrite(ctx context.Context) error
	// Close releases the backend's resources.
	Close() error
}

// Keys stores API keys (hashed).
type Keys interface {
	CreateAPIKey(ctx context.Context, k APIKey) error
	// APIKeyByHash returns the key with that hash, revoked or not.
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	ListAPIKeys(ctx context.Context) ([]APIKey, error)
	// RevokeAPIKey marks the key revoked; revoking twice is not an error.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
}

// APIKey is a stored API key. The secret itself is never stored, only its
// hash.
type APIKey struct {
	ID        string
	Name      string
	Hash      string
	Hint      string // the last characters of the key, to recognise it
	CreatedAt time.Time
	RevokedAt *time.Time
	// Role is RoleAdmin, RoleDeveloper or RoleReadOnly. Keys made
	// before roles existed are admins.
	Role string
	// WorkspaceID binds a developer or read-only key to its workspace;
	// "" for an admin (organization scope).
	WorkspaceID string
	// Status is KeyActive, KeyInactive or KeyArchived (revoked).
	Status string
	// CreatedByKeyID is the key that created this one ("" for the
	// command line or the bootstrap key).
	CreatedByKeyID string
}

// EnvironmentKeys stores the hashed keys of environments.
type EnvironmentKeys interface {
	CreateEnvironmentKey(ctx context.Context, k EnvironmentKey) error
	// EnvironmentKeyByHash returns the key with that hash, revoked or not,
	// with the workspace of its environment.
	EnvironmentKeyByHash(ctx context.Context, hash string) (EnvironmentKey, error)
	// ListEnvironmentKeys lists an environment's keys, oldest first.
	ListEnvironmentKeys(ctx context.Context, environmentID string) ([]EnvironmentKey, error)
	// RevokeEnvironmentKey marks a key of the environment revoked.
	RevokeEnvironmentKey(ctx context.Context, environmentID, id string, at time.Time) (EnvironmentKey, error)
}

// EnvironmentKey is a stored environment key (its hash only).
type EnvironmentKey struct {
	ID            string
	EnvironmentID string
	Hash          string
	Hint          string
	CreatedAt     time.Time
	RevokedAt     *time.Time
	// WorkspaceID is the workspace of the key's environment, the one the
	// key works in; EnvironmentKeyByHash sets it ("" when the environment
	// is gone).
	WorkspaceID string
}

// Machines stores machines enrolled with a machine token (its hash only).
type Machines interface {
	CreateMachine(ctx context.Context, m Machine) error
	// MachineByHash returns the machine whose token has that hash,
	// revoked or not.
	MachineByHash(ctx context.Context, hash string) (Machine, error)
	GetMachine(ctx context.Context, id string) (Machine, error)
	// ListMachines lists every machine, oldest first.
	ListMachines(ctx context.Context) ([]Machine, error)
	// RevokeMachine marks the machine's token revoked; revoking twice
	// keeps the first time.
	RevokeMachine(ctx context.Context, id string, at time.Time) (Machine, error)
}

// Machine is a machine enrolled to host sessions of some self-hosted
// environments through machine-scoped executors.
type Machine struct {
	ID             string
	Name           string
	EnvironmentIDs []string // the environments whose sessions it may serve
	Hash           string
	Hint           string // the last characters of the token
	CreatedAt      time.Time
	RevokedAt      *time.Time
	// WorkspaceID is the machine's workspace; the store sets it from the
	// context it is created with (WithWorkspace).
	WorkspaceID string
}

// Agents stores agents as immutable versions.
type Agents interface {
	// CreateAgent stores version 1 of a new agent, and the outcome of
	// ctx's WithOutcome, if any, in the same transaction.
	CreateAgent(ctx context.Context, a ma.Agent) error
	// GetAgent returns the given version, or the latest when version is 0.
	GetAgent(ctx context.Context, id string, version int64) (ma.Agent, error)
	// UpdateAgent reads the latest version, calls fn and stores what it
	// returns as a new version when changed is true, atomically. An
	// error from fn is returned as is.
	UpdateAgent(ctx context.Context, id string, fn func(cur ma.Agent) (next ma.Agent, changed bool, err error)) (ma.Agent, error)
	// ListAgents lists the latest version of each agent.
	ListAgents(ctx context.Context, q ListQuery) ([]Item[ma.Agent], error)
	// ListAgentVersions lists every version of one agent, newest first.
	ListAgentVersions(ctx context.Context, id string, q ListQuery) ([]Item[ma.Agent], error)
}

// Environments stores environments. Names are unique within a workspace
// (ErrConflict).
type Environments interface {
	// CreateEnvironment stores a new environment, and the outcome of
	// ctx's WithOutcome, if any, in the same transaction.
	CreateEnvironment(ctx context.Context, e ma.Environment) error
	GetEnvironment(ctx context.Context, id string) (ma.Environment, error)
	UpdateEnvironment(ctx context.Context, id string, fn func(cur *ma.Environment) error) (ma.Environment, error)
	ListEnvironments(ctx context.Context, q ListQuery) ([]Item[ma.Environment], error)
	DeleteEnvironment(ctx context.Context, id string) error
}

// Sessions stores sessions and their event logs.
type Sessions interface {
	// CreateSession stores a new session; fn, if not nil, runs in the same
	// transaction (to append initial events).
	CreateSession(ctx context.Context, s ma.Session, fn func(Tx) error) (ma.Session, error)
	GetSession(ctx context.Context, id string) (ma.Session, error)
	ListSessions(ctx context.Context, q SessionQuery) ([]Item[ma.Session], error)
	// UpdateSession runs fn in one transaction on the session. If fn
	// returns an error nothing is written and the error is returned.
	UpdateSession(ctx context.Context, id string, fn func(Tx) error) (ma.Session, error)
	// DeleteSession removes the session and its events.
	DeleteSession(ctx context.Context, id string) error
	// ListEvents lists the live events of a session (each event id once,
	// at the position of its latest echo). With q.MaxBytes the page is
	// read within that byte budget (see Entry).
	ListEvents(ctx context.Context, sessionID string, q EventQuery) ([]Entry, error)
	// ReadLog returns the log entries with seq > after, in seq order, at
	// most limit of them.
	ReadLog(ctx context.Context, sessionID string, after int64, limit int) ([]Entry, error)
	// ReadLogRaw is ReadLog without decoding the events: only Seq, Raw,
	// Size and the event's Type and ID are set. This is what streams
	// deliver. A positive maxBytes is the read's byte budget (see Entry).
	ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int, maxBytes int64) ([]Entry, error)
	// SessionIDsByStatus returns the ids of sessions in one of the
	// statuses (for recovery at start).
	SessionIDsByStatus(ctx context.Context, statuses ...string) ([]string, error)
	// SessionIDsWithPending returns the ids of sessions with queued client
	// events (for recovery at start).
	SessionIDsWithPending(ctx context.Context) ([]string, error)
	// LastSeq returns the sequence number of the session's last log entry.
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	// ReadViewRaw is ReadLogRaw of the entries of one view of the log
	// (the zero View reads them all, as ReadLogRaw does).
	ReadViewRaw(ctx context.Context, sessionID string, v View, after int64, limit int, maxBytes int64) ([]Entry, error)
	// ListThreads lists the session's child threads (rows written by
	// Tx.PutThread; the primary thread is derived, not stored), oldest
	// first, archived ones included. ErrNotFound if the session is not
	// in ctx's workspace.
	ListThreads(ctx context.Context, sessionID string, q ThreadQuery) ([]Item[ma.SessionThread], error)
	// GetThread returns a child thread of the session (ErrNotFound if
	// the session has no such thread or is not in ctx's workspace).
	GetThread(ctx context.Context, sessionID, threadID string) (ma.SessionThread, error)
}

// Tx is a transaction on one session.
type Tx interface {
	// Session is the session row; changes to it are written on commit.
	// Status changes must go with the event that announces them.
	Session() *ma.Session
	// LastSeq is the sequence number of the last appended event.
	LastSeq() int64
	// Pending returns the queued client events (processed_at null, not
	// flushed, not superseded) in the order they were queued.
	Pending() ([]ma.Event, error)
	// Append appends events to the log, each with the next sequence
	// number. An event without an ID gets a new one (the ID is set on the
	// caller's value). An event whose ID is already in the log is a new
	// echo of it: the older entry stops being live. A live event with a
	// null processed_at and a client type is pending.
	Append(evs ...*ma.Event) error
	// Event returns the live event with that id.
	Event(id string) (ma.Event, error)
	// ReadLog returns the log entries with seq > after, in seq order, as
	// this transaction sees them (its own appends included).
	ReadLog(after int64) ([]Entry, error)
	// MarkToolRunning records that a tool use is about to run outside the
	// log (a built-in tool on an executor). A mark still there after a
	// crash tells the next runner the tool may have run.
	MarkToolRunning(toolUseID string) error
	// UnmarkToolRunning removes a mark; "" removes all of the session's.
	UnmarkToolRunning(toolUseID string) error
	// ToolsRunning returns the marked tool uses.
	ToolsRunning() ([]string, error)
	// Threads returns the session's child threads, oldest first,
	// archived ones included (the primary thread is not stored).
	Threads() ([]ma.SessionThread, error)
	// Thread returns a child thread of the session; ErrNotFound if the
	// session has none with that id.
	Thread(id string) (ma.SessionThread, error)
	// PutThread creates or replaces a child thread of the session
	// (th.SessionID and th.Type are set; CreatedAt and UpdatedAt, when
	// empty, to now). Threads are written only in the session's
	// transaction, with the events that announce their changes.
	PutThread(th *ma.SessionThread) error
	// RecordOutcome records, in this transaction, the outcome of the
	// request that makes its change (o.SessionID is set to the session's
	// id), so that both are committed or neither. It fails with
	// ErrKeyRecorded when o.Scope holds o.Key in a record made at or
	// after since; an older record of the key is replaced.
	RecordOutcome(o IdempotentOutcome, since time.Time) error
	// FinishDeploymentRun records, in this transaction, that the pending
	// deployment run runID created this session, so that the session and
	// its run commit together or neither does. A run that has an outcome
	// already (AbandonDeploymentRuns marked it) is an ErrConflict.
	FinishDeploymentRun(runID string) error
}

// Entry is one log entry: an event and its position.
//
// A read with a byte budget (EventQuery.MaxBytes, ReadLogRaw's maxBytes)
// never loads more event JSON than the budget: it takes entries, in the
// order it reads them, while their Sizes total at most the budget. The
// entry that would take the total over ends the read and comes last in
// read order (first in a page read backwards), as a head: Seq, Size and
// its event's ID and Type, without Raw or the rest of the event. The
// caller learns that more follows and how large it is, and may read it
// again with a budget that fits it. An entry larger than the budget is
// therefore only ever returned as a head.
type Entry struct {
	Seq   int64
	Event ma.Event
	// Thread is the thread whose stream holds the event
	// (ma.StreamThread: "" for the primary), OnSession whether the
	// session's stream shows it (ma.OnSessionStream); set by every read,
	// heads included. View.Includes reads them.
	Thread    string
	OnSession bool
	// Raw is the event's JSON as stored (what the API sends); nil in a
	// head.
	Raw []byte
	// Size is the length of the event's JSON, in a head too.
	Size int64
}

// Head reports whether e is the head that ended a read with a byte
// budget (its JSON was not read).
func (e Entry) Head() bool { return e.Raw == nil }

// Item is a listed object with its position in the list order, used to make
// page cursors.
type Item[T any] struct {
	Pos   int64
	Value T
}

// ListQuery pages through objects in creation order.
type ListQuery struct {
	// After and Before are exclusive positions (0 = unbounded).
	After, Before int64
	// Desc lists newest first.
	Desc            bool
	Limit           int
	IncludeArchived bool
	CreatedGTE      *time.Time
	CreatedLTE      *time.Time
}

// SessionQuery adds the session filters to ListQuery.
type SessionQuery struct {
	ListQuery
	AgentID      string
	AgentVersion int64
	// EnvironmentID filters by environment (a reins extension: the
	// console's environment filter).
	EnvironmentID string
	// DeploymentID keeps the sessions a run of that deployment created.
	DeploymentID string
	// MemoryStoreID keeps the sessions with that memory store among
	// their resources.
	MemoryStoreID string
	Statuses      []string
	// StopReasons keeps the idle sessions whose stop reason is one of
	// these types (a reins extension: the console's "requires action"
	// and "failed" filters).
	StopReasons []string
	CreatedGT   *time.Time
	CreatedLT   *time.Time
}

// EventQuery pages through a session's live events.
type EventQuery struct {
	// After and Before are exclusive seqs (0 = unbounded).
	After, Before int64
	Desc          bool
	Limit         int
	Types         []string
	// Processed-at bounds (events still queued never match a bound).
	GT, GTE, LT, LTE *time.Time
	// MaxBytes, if positive, is the page's byte budget (see Entry).
	MaxBytes int64
	// View is the part of the log listed (the zero View: all of it).
	View View
	// Raw leaves the events undecoded, as ReadLogRaw does: only Seq,
	// Raw, Size and the event's ID and Type are set.
	Raw bool
}

// IsPending reports whether ev, once appended, waits in the session's
// queue: a client event that is not processed and not flushed.
func IsPending(ev *ma.Event) bool {
	if ev.ProcessedAt != nil || ev.Flushed {
		return false
	}
	switch ev.Type {
	case ma.EventUserMessage, ma.EventUserInterrupt, ma.EventSystemMessage, ma.EventUserDefineOutcome:
		return true
	}
	return false
}

// ToolCalls stores the platform tool calls by idempotency key, so that a
// call repeated with its key answers the first outcome and never runs the
// tool twice.
type ToolCalls interface {
	// BeginToolCall records c unless a call of the session has its key:
	// it returns the recorded call and whether it is c (created).
	BeginToolCall(ctx context.Context, c ToolCall) (ToolCall, bool, error)
	// SetToolCallUse records the agent.tool_use the call recorded.
	SetToolCallUse(ctx context.Context, sessionID, key, toolUseID string) error
	// FinishToolCall records the call's outcome.
	FinishToolCall(ctx context.Context, sessionID, key string, outcome []byte) error
	// DeleteToolCall forgets a call that ran nothing: its key may be used
	// again. Deleting a missing call is not an error.
	DeleteToolCall(ctx context.Context, sessionID, key string) error
}

// Idempotency keeps the outcomes of API requests made with an
// Idempotency-Key (agent, environment and session create, event send):
// each is recorded by the transaction of the change its request made
// (Tx.RecordOutcome, or WithOutcome for CreateAgent and
// CreateEnvironment), so that the request repeated with its key answers
// the first outcome and changes nothing twice. A session's records are
// deleted with it.
type Idempotency interface {
	// IdempotentOutcome returns the outcome recorded for key in scope at
	// or after since; ErrNotFound if there is none.
	IdempotentOutcome(ctx context.Context, scope, key string, since time.Time) (IdempotentOutcome, error)
	// ForgetOutcomes deletes the outcomes recorded before t and returns
	// how many it deleted.
	ForgetOutcomes(ctx context.Context, before time.Time) (int64, error)
}

// IdempotentOutcome is the outcome of an API request made with an
// Idempotency-Key.
type IdempotentOutcome struct {
	// Scope is who made the request (the key it was authenticated
	// with); Key is its Idempotency-Key.
	Scope, Key string
	// RequestHash identifies the request (method, path and body): the
	// same key with another request is refused.
	RequestHash string
	// SessionID is the session the request created or changed ("" for
	// an agent or an environment).
	SessionID string
	// Status is the response's HTTP status.
	Status int
	// Response is the response body as sent, or nil when the answer is
	// the session's log entries FirstSeq to LastSeq (a send's events as
	// appended).
	Response          []byte
	FirstSeq, LastSeq int64
	CreatedAt         time.Time
}

type outcomeKey struct{}

type keptOutcome struct {
	o     IdempotentOutcome
	since time.Time
}

// WithOutcome returns a context with which CreateAgent and
// CreateEnvironment record o in their transaction, by the rule of
// Tx.RecordOutcome (ErrKeyRecorded when the key is held since since).
func WithOutcome(ctx context.Context, o IdempotentOutcome, since time.Time) context.Context {
	return context.WithValue(ctx, outcomeKey{}, keptOutcome{o, since})
}

// OutcomeFrom returns the outcome ctx has to record, if any.
func OutcomeFrom(ctx context.Context) (o IdempotentOutcome, since time.Time, ok bool) {
	k, ok := ctx.Value(outcomeKey{}).(keptOutcome)
	return k.o, k.since, ok
}

// ToolCall is a platform tool call recorded under its idempotency key.
type ToolCall struct {
	SessionID, Key string
	// RequestHash identifies the request's body: the same key with
	// another body is refused.
	RequestHash string
	ToolUseID   string
	// Outcome is the endpoint's response (JSON), nil while the call runs.
	Outcome   []byte
	CreatedAt time.Time
}
