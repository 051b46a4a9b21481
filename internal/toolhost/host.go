package toolhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/executor/memsync"
	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
	"github.com/reinsdev/reins/tools"
)

// Host is the tool host: it places sessions on executors through the
// executor hub (sessions of self-hosted environments on remote executors,
// sessions of cloud environments on an in-process executor per
// environment, in sandboxes, within the server's slots), runs their
// built-in tools there, and readies and keeps what the tools work on:
// credentials, resources, skills, workspaces and outputs. With replicas it
// moves sessions to the replica of their executors or workspace. It
// implements tool.Runner and tool.Placer, and the API's httpapi.Lifecycle
// and httpapi.ExecutorList.
type Host struct {
	hub       *executorhub.Hub
	st        Store
	keys      *vault.Keyring // opens environment_variable credentials
	workspace string         // root of the local executors' workspaces
	sandboxes *sandboxes     // nil: cloud sessions' tools run on the host (--sandbox=none)
	work      workRetirer    // nil: no work queue
	slots     *capacity      // cloud sessions placed at once
	hands     *replicaHands  // nil: no replicas (SQLite)
	outputs   *outputs       // nil: outputs are not kept
	memory    *memoryDirs    // cloud sessions' memory stores
	log       *slog.Logger

	// life's context is the lifetime of the local executors; it owns
	// them, the hands' announcer and the waits of either.
	life service.Base

	mu      sync.Mutex                    // guards the fields below
	leases  map[string]*executorhub.Lease // per session: its placement
	locals  map[string]*executor.Client   // per cloud environment: its in-process executor
	secrets map[string][]secret           // per session: injected values to redact from results
	// resources are the resources placed in each session's workspace
	// during its current placement.
	resources placedResources
	// reported is, per session, the error type last logged for each
	// repository that could not be cloned (logged again when it changes).
	reported map[string]map[string]string
}

// Config configures a Host.
type Config struct {
	Hub   *executorhub.Hub
	Store Store
	// Keys opens vault credentials and repository tokens, and seals the
	// egress proxies' CAs.
	Keys *vault.Keyring
	// DataDir holds the workspaces, sandboxes, CAs and package layers.
	DataDir  string
	Sandbox  SandboxConfig
	Packages PackagesConfig
	// Replicas is set when replicas share the database (PostgreSQL).
	Replicas *ReplicaConfig
	// Outputs is set to keep the files cloud sessions write to their
	// outputs directory as Files.
	Outputs *OutputsConfig
	Logger  *slog.Logger
}

// ReplicaConfig is this replica's part among the replicas of a database.
type ReplicaConfig struct {
	// ID names this replica; TTL is the lease of the sessions it runs.
	ID  string
	TTL time.Duration
	// Bus carries the announcements of executors to the other replicas.
	Bus *bus.Bus
}

// OutputsConfig configures the keeping of sessions' outputs.
type OutputsConfig struct {
	// SpoolDir is where a file's content waits for the store; MaxSize
	// bounds one file.
	SpoolDir string
	MaxSize  int64
	// Save stores one file.
	Save SaveFunc
}

// New assembles a tool host; it starts nothing (see Start).
func New(cfg Config) (*Host, error) {
	t := &Host{hub: cfg.Hub, st: cfg.Store, keys: cfg.Keys, workspace: filepath.Join(cfg.DataDir, "workspaces"), log: cfg.Logger,
		leases: map[string]*executorhub.Lease{}, locals: map[string]*executor.Client{}, secrets: map[string][]secret{}, resources: placedResources{},
		reported: map[string]map[string]string{}}
	var err error
	t.sandboxes, err = newSandboxes(cfg.Sandbox, cfg.Packages, cfg.Store, cfg.Keys, cfg.DataDir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	if r := cfg.Replicas; r != nil {
		t.hands = &replicaHands{st: cfg.Store, bus: r.Bus, hub: cfg.Hub, replica: r.ID, ttl: r.TTL, log: cfg.Logger}
	}
	var owner *memsync.Owner
	if t.sandboxes != nil && os.Geteuid() == 0 {
		uid, gid := t.sandboxes.m.Uid()
		owner = &memsync.Owner{UID: uid, GID: gid}
	}
	t.memory = newMemoryDirs(memories.SyncStore(cfg.Store), owner)
	slots, how := cfg.Sandbox.slots()
	t.slots = newCapacity(slots, t.yield)
	cfg.Logger.Info("cloud sessions' tools run in at most this many sessions at once", "slots", slots, "from", how)
	if o := cfg.Outputs; o != nil {
		t.outputs = newOutputs(cfg.Store, o.Save, o.SpoolDir, o.MaxSize, cfg.Logger)
	}
	return t, nil
}

// SetWork gives the host the work queue whose items retire when an
// executor takes their session (call it before Start).
func (t *Host) SetWork(w workRetirer) { t.work = w }

// Sandboxed reports whether cloud sessions' tools run in sandboxes.
func (t *Host) Sandboxed() bool { return t.sandboxes != nil }

// SlotsInUse returns the number of tool slots held and of sessions waiting
// for one (a metric).
func (t *Host) SlotsInUse() (held, waiting int) { return t.slots.inUse() }

// Start says whether cloud sessions' tools can run (it makes one sandbox)
// and starts the package installer (or warns that there are no
// sandboxes), removes the workspaces of sessions deleted while the server
// was down and, with replicas, starts announcing this replica's executors
// (see Announce).
func (t *Host) Start(ctx context.Context) error {
	if _, err := t.life.Begin(ctx); err != nil {
		return err
	}
	if t.sandboxes != nil {
		if err := t.sandboxes.Start(ctx); err != nil {
			return err
		}
	} else {
		t.log.Warn("--sandbox=none: cloud sessions' tools run on this host as the server's user, confined by Landlock only; they can read the server's files and reach its network. Use this only on a trusted single-user machine.")
	}
	t.sweepWorkspaces(ctx)
	if t.hands != nil {
		t.life.Go(t.hands.announce)
	}
	return nil
}

// workRetirer retires the work item of a session that an executor takes,
// so that no pull worker is ever offered it.
type workRetirer interface {
	// Retire reports whether a worker acknowledged the item first.
	Retire(ctx context.Context, sessionID string) (acked bool, err error)
}

// Placed reports whether an executor holds the session now.
func (t *Host) Placed(sessionID string) bool {
	t.mu.Lock()
	l := t.leases[sessionID]
	t.mu.Unlock()
	if l == nil {
		return false
	}
	select {
	case <-l.Done():
		return false
	default:
		return true
	}
}

// localRegistrationWait bounds how long a cloud session waits for its
// in-process executor to register.
const localRegistrationWait = 10 * time.Second

// Place implements tool.Placer.
func (t *Host) Place(ctx context.Context, sess *ma.Session) (*tool.Wait, error) {
	t.mu.Lock()
	l := t.leases[sess.ID]
	t.mu.Unlock()
	env, err := t.st.GetEnvironment(ctx, sess.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("environment %s no longer exists", sess.EnvironmentID)
	}
	if err != nil {
		return nil, err
	}
	req := t.assignRequest(sess, env.ID)
	if env.CheckOutsideExecutors() != nil {
		return t.placeLocal(ctx, sess, req, l)
	}
	if l != nil {
		if l.Resume() {
			return nil, nil
		}
		t.drop(sess.ID, l) // ended, or its slot went to another session
	}
	if err := t.memoryAssignment(ctx, sess, &req); err != nil {
		return nil, err
	}
	changed := t.hub.Changed(env.ID)
	l, err = t.hub.Assign(ctx, req)
	if errors.Is(err, executorhub.ErrNoExecutor) {
		return t.noExecutor(ctx, sess.ID, env.ID, changed)
	}
	if err != nil {
		return nil, err
	}
	t.keep(sess.ID, l)
	if t.work == nil {
		return nil, nil
	}
	// One kind of hands per session: the session's work item retires now
	// that an executor holds it, unless a worker acknowledged it first.
	acked, err := t.work.Retire(ctx, sess.ID)
	if err != nil || acked {
		t.Release(sess.ID)
		if err != nil {
			return nil, err
		}
		handedOver := make(chan struct{})
		close(handedOver) // the next step finds the worker
		return &tool.Wait{C: handedOver, Reason: "a worker of the environment took the session's work"}, nil
	}
	return nil, nil
}

// assignRequest is the assignment of a session to an executor.
func (t *Host) assignRequest(sess *ma.Session, envID string) executorhub.AssignRequest {
	return executorhub.AssignRequest{EnvironmentID: envID, SessionID: sess.ID, Tools: harness.BuiltinTools(&sess.Agent)}
}

// placeLocal places a cloud environment's session on the environment's
// in-process executor, once the session holds one of the server's slots.
// l is the session's lease from an earlier placement, if any.
func (t *Host) placeLocal(ctx context.Context, sess *ma.Session, req executorhub.AssignRequest, l *executorhub.Lease) (*tool.Wait, error) {
	if l == nil {
		if err := t.toWorkspace(ctx, sess); err != nil {
			return nil, err
		}
	}
	// The slot first, then the lease: a slot taken back from an idle
	// session ends its lease only while that lease is idle (yield).
	if wait, why := t.slots.take(sess.ID); wait != nil {
		if l != nil && l.Yield() {
			t.drop(sess.ID, l)
		}
		return &tool.Wait{C: wait, Reason: why}, nil
	}
	if l != nil {
		if l.Resume() {
			return nil, nil
		}
		t.drop(sess.ID, l)
	}
	if err := t.assignLocal(ctx, sess, req); err != nil {
		t.slots.release(sess.ID)
		return nil, err
	}
	return nil, nil
}

// assignLocal assigns a session that holds a slot to its environment's
// in-process executor.
func (t *Host) assignLocal(ctx context.Context, sess *ma.Session, req executorhub.AssignRequest) error {
	if t.keys != nil && (len(sess.VaultIDs) > 0 || hasRepositories(sess)) {
		// Cloud environments get the session's environment_variable
		// credentials (self-hosted machines do not, as in the
		// Managed Agents API) and its repositories' tokens.
		secrets, err := t.credentials(ctx, sess)
		if err != nil {
			return err
		}
		repos, err := t.repositoryTokens(ctx, sess)
		if err != nil {
			return err
		}
		secrets = append(secrets, repos...)
		if req.Env, err = t.credentialEnv(sess.ID, secrets); err != nil {
			return err
		}
		t.mu.Lock()
		t.secrets[sess.ID] = secrets
		t.mu.Unlock()
	}
	if err := t.ensureLocal(req.EnvironmentID); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, localRegistrationWait)
	defer cancel()
	l, err := t.hub.WaitAssign(wctx, req)
	if err != nil {
		return err
	}
	t.keep(sess.ID, l)
	return nil
}

// keep records the session's lease.
func (t *Host) keep(sessionID string, l *executorhub.Lease) {
	t.mu.Lock()
	t.leases[sessionID] = l
	t.mu.Unlock()
}

func (t *Host) drop(sessionID string, l *executorhub.Lease) {
	t.mu.Lock()
	if t.leases[sessionID] == l {
		delete(t.leases, sessionID)
	}
	t.mu.Unlock()
}

// ensureLocal starts the in-process executor of a cloud environment.
func (t *Host) ensureLocal(envID string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.locals[envID]; c != nil {
		select {
		case <-c.Done():
		default:
			return nil
		}
	}
	dir := filepath.Join(t.workspace, envID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	// Without the server's sandboxes (--sandbox=none) the tools run on
	// this host, as the operator chose.
	sessions := &executor.BuiltinSessions{Dir: dir, Logger: t.log, Unconfined: t.sandboxes == nil}
	if t.sandboxes != nil {
		sessions.Launchers = t.sandboxes
		uid, gid := t.sandboxes.owner()
		sessions.Owner = &tools.Owner{UID: uid, GID: gid}
	}
	// The server's slots bound the sessions placed at once; the executor
	// has room for twice as many, for the releases still in flight.
	c := executorhub.NewLocal(t.hub, executorhub.LocalOptions{EnvironmentID: envID, Sessions: sessions, Capabilities: executor.BuiltinCapabilities(),
		MaxSessions: 2 * t.slots.size, Logger: t.log})
	started := t.life.Go(func(ctx context.Context) {
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			t.log.Error("local executor stopped", "environment", envID, "err", err)
		}
	})
	if !started {
		return errors.New("the server is shutting down")
	}
	t.locals[envID] = c
	return nil
}

// runTool runs a tool call on the session's executor (RunTool).
func (t *Host) runTool(ctx context.Context, sess *ma.Session, call tool.Call) tool.Result {
	t.mu.Lock()
	l := t.leases[sess.ID]
	t.mu.Unlock()
	if l == nil {
		return tool.ErrorResult(fmt.Sprintf("The tool %s could not run: the session has no executor.", call.Name))
	}
	res, err := l.CallTool(ctx, call)
	switch {
	case err == nil:
	case errors.Is(err, executorhub.ErrToolOutcomeUnknown), errors.Is(err, executor.ErrSessionEnded):
		t.drop(sess.ID, l)
		return tool.ErrorResult(executorhub.OutcomeUnknownText)
	case ctx.Err() != nil:
		return tool.ErrorResult("The tool call was interrupted.")
	default:
		return tool.ErrorResult(fmt.Sprintf("The tool %s could not run: %v", call.Name, err))
	}
	out := res
	out.Content = slices.Clone(res.Content) // redacted below; the lease keeps res
	t.mu.Lock()
	secrets := t.secrets[sess.ID]
	t.mu.Unlock()
	redact(out.Content, secrets)
	if len(out.Content) == 0 {
		out.Content = []ma.ContentBlock{{Type: "text", Text: "(no output)"}}
	}
	return out
}

// Idle implements tool.Placer: the session's executor slot may go to
// another session until the next Place.
func (t *Host) Idle(sessionID string) {
	t.mu.Lock()
	l := t.leases[sessionID]
	t.mu.Unlock()
	if l != nil {
		l.Idle()
	}
	t.slots.idle(sessionID) // after the lease is idle: yield needs that
}

// yield ends the placement of an idle session whose slot went to another
// session; a session that resumed meanwhile keeps its lease (it has taken
// a slot again first).
func (t *Host) yield(sessionID string) {
	t.mu.Lock()
	l := t.leases[sessionID]
	t.mu.Unlock()
	if l != nil && l.Yield() {
		t.drop(sessionID, l)
	}
}

// Release implements tool.Placer.
func (t *Host) Release(sessionID string) {
	t.mu.Lock()
	l := t.leases[sessionID]
	delete(t.leases, sessionID)
	delete(t.secrets, sessionID)
	delete(t.resources, sessionID)
	delete(t.reported, sessionID)
	t.mu.Unlock()
	if t.hands != nil {
		t.hands.forget(sessionID)
	}
	if t.outputs != nil {
		t.outputs.forget(sessionID)
	}
	if t.sandboxes != nil {
		t.sandboxes.setCredentials(sessionID, nil) // the proxies keep what they were given
	}
	t.slots.release(sessionID)
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.log.Debug("release lease", "session", sessionID, "err", err)
	}
}

// SessionEnded implements httpapi.SessionLifecycle: an archived or
// deleted session's sandbox is torn down at once, and a deleted
// session's workspace is removed.
func (t *Host) SessionEnded(ctx context.Context, sess *ma.Session, deleted bool) {
	t.Release(sess.ID)
	if t.sandboxes != nil {
		t.sandboxes.end(sess.ID)
	}
	if deleted {
		t.removeWorkspace(sess.EnvironmentID, sess.ID)
	}
}

// EnvironmentDeleted implements httpapi.Lifecycle: the environment's
// in-process executor stops, and with it its sessions' sandboxes; its
// outside executors are disconnected.
func (t *Host) EnvironmentDeleted(ctx context.Context, id string) {
	t.mu.Lock()
	c := t.locals[id]
	delete(t.locals, id)
	t.mu.Unlock()
	if c != nil {
		c.Stop()
	}
	t.hub.DisconnectEnvironment(id, fmt.Sprintf("environment %s was deleted", id))
}

// EnvironmentArchived implements httpapi.Lifecycle: the environment's
// outside executors are disconnected (their keys no longer work).
func (t *Host) EnvironmentArchived(ctx context.Context, id string) {
	t.hub.DisconnectEnvironment(id, fmt.Sprintf("environment %s is archived", id))
}

// EnvironmentKeyRevoked implements httpapi.Lifecycle: the executors
// connected with the key are disconnected at once.
func (t *Host) EnvironmentKeyRevoked(ctx context.Context, k store.EnvironmentKey) {
	t.hub.RevokeCredential(k.Hash, fmt.Sprintf("environment key %s was revoked", k.ID))
}

// MachineRevoked implements httpapi.Lifecycle: the executors connected
// with the machine's token are disconnected at once.
func (t *Host) MachineRevoked(ctx context.Context, m store.Machine) {
	t.hub.RevokeCredential(m.Hash, fmt.Sprintf("machine %s was revoked", m.ID))
}

func (t *Host) removeWorkspace(envID, sessionID string) {
	if !safeName(envID) || !safeName(sessionID) {
		return
	}
	if err := os.RemoveAll(filepath.Join(t.workspace, envID, sessionID)); err != nil {
		t.log.Warn("remove a deleted session's workspace", "session", sessionID, "err", err)
	}
	if err := os.Remove(filepath.Join(t.workspace, envID, sessionID+markerSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.log.Warn("remove a deleted session's workspace marker", "session", sessionID, "err", err)
	}
	if err := os.RemoveAll(filepath.Join(t.workspace, envID, sessionID+sandbox.MemorySuffix)); err != nil {
		t.log.Warn("remove a deleted session's memory directories", "session", sessionID, "err", err)
	}
	t.memory.forget(sessionID)
}

// safeName reports whether an id can name a directory.
func safeName(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// sweepWorkspaces removes the workspaces of sessions deleted while the
// server was down.
func (t *Host) sweepWorkspaces(ctx context.Context) {
	envs, _ := os.ReadDir(t.workspace)
	for _, env := range envs {
		sessions, _ := os.ReadDir(filepath.Join(t.workspace, env.Name()))
		for _, s := range sessions {
			id := strings.TrimSuffix(strings.TrimSuffix(s.Name(), markerSuffix), sandbox.MemorySuffix)
			_, err := t.st.GetSession(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				t.removeWorkspace(env.Name(), id)
			}
		}
	}
}

// Stop stops the sandboxes' proxies and the package installs in flight
// (the tool calls waiting for them fail), then the local executors and
// the announcer, waits for them until ctx ends, and tears down the
// sandboxes. Call it after the sessions' runners left.
func (t *Host) Stop(ctx context.Context) error {
	var err error
	if t.sandboxes != nil {
		err = t.sandboxes.Stop(ctx)
	}
	err = errors.Join(err, t.life.Halt(ctx))
	if t.sandboxes != nil {
		t.sandboxes.closeAll()
	}
	return err
}
