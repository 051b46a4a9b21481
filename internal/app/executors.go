package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/tools"
)

// credentials lets the executor hub check environment keys against the
// store.
type credentials struct{ st store.Store }

func (c credentials) VerifyEnvironmentKey(ctx context.Context, keyHash string) (string, error) {
	k, err := c.st.EnvironmentKeyByHash(ctx, keyHash)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: unknown environment key", executor.ErrCredentialRejected)
	}
	if err != nil {
		return "", err
	}
	if k.RevokedAt != nil {
		return "", fmt.Errorf("%w: environment key %s was revoked", executor.ErrCredentialRejected, k.ID)
	}
	env, err := c.st.GetEnvironment(ctx, k.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: environment %s was deleted", executor.ErrCredentialRejected, k.EnvironmentID)
	}
	if err != nil {
		return "", err
	}
	if env.ArchivedAt != nil {
		return "", fmt.Errorf("%w: environment %s is archived", executor.ErrCredentialRejected, env.ID)
	}
	if err := env.CheckOutsideExecutors(); err != nil {
		return "", fmt.Errorf("%w: environment key %s: %w", executor.ErrCredentialRejected, k.ID, err)
	}
	return env.ID, nil
}

// allowRegistration is the hub's AllowRegistration: an outside executor
// may only register in an environment that outside executors may serve.
// It holds whatever token the executor has, including one issued before
// its environment's keys were refused, so a cloud environment's sessions,
// and the credentials assigned with them, only ever reach its in-process
// executor.
func (c credentials) allowRegistration(ctx context.Context, r executor.Registration) error {
	if r.Local || r.EnvironmentID == "" {
		return nil
	}
	env, err := c.st.GetEnvironment(ctx, r.EnvironmentID)
	if err != nil {
		return err
	}
	return env.CheckOutsideExecutors()
}

// VerifyMachineToken implements executor.Credentials: a machine token is
// good while its machine is not revoked.
func (c credentials) VerifyMachineToken(ctx context.Context, tokenHash string) (string, error) {
	m, err := c.st.MachineByHash(ctx, tokenHash)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: unknown machine token", executor.ErrCredentialRejected)
	}
	if err != nil {
		return "", err
	}
	if m.RevokedAt != nil {
		return "", fmt.Errorf("%w: machine %s was revoked", executor.ErrCredentialRejected, m.ID)
	}
	return m.ID, nil
}

// chainRegistration returns an AllowRegistration that asks first, then
// next if it is set.
func chainRegistration(first, next func(context.Context, executor.Registration) error) func(context.Context, executor.Registration) error {
	if next == nil {
		return first
	}
	return func(ctx context.Context, r executor.Registration) error {
		if err := first(ctx, r); err != nil {
			return err
		}
		return next(ctx, r)
	}
}

// hubTools runs built-in tools through the executor hub: sessions of
// self-hosted environments on remote executors, sessions of cloud
// environments on an in-process executor per environment. It implements
// tool.Runner and tool.Placer.
type hubTools struct {
	hub       *executor.Hub
	st        store.Store
	keys      *vault.Keyring // opens environment_variable credentials
	workspace string         // root of the local executors' workspaces
	sandboxes *sandboxes     // nil: cloud sessions' tools run on the host (--sandbox=none)
	work      workRetirer    // nil: no work queue
	slots     *capacity      // cloud sessions placed at once
	hands     *replicaHands  // nil: no replicas (SQLite)
	outputs   *outputs       // nil: outputs are not kept
	log       *slog.Logger

	// life's context is the lifetime of the local executors; it owns
	// them, the hands' announcer and the waits of either.
	life service.Base

	mu      sync.Mutex // guards the fields below
	leases  map[string]*executor.Lease
	locals  map[string]*executor.Client
	secrets map[string][]secret // per session: injected values to redact from results
	// resources are the resources placed in each session's workspace
	// during its current placement.
	resources placedResources
}

// secret is an environment_variable credential opened for a session.
type secret struct {
	name, value string
	hosts       []string // the credential's allowed hosts; nil: unrestricted
	header      bool     // substituted in request headers (and query strings)
	body        bool     // substituted in request bodies
}

func newHubTools(hub *executor.Hub, st store.Store, keys *vault.Keyring, workspace string, log *slog.Logger) *hubTools {
	return &hubTools{hub: hub, st: st, keys: keys, workspace: workspace, log: log,
		leases: map[string]*executor.Lease{}, locals: map[string]*executor.Client{}, secrets: map[string][]secret{}, resources: placedResources{}}
}

// credentials opens the session's environment_variable credentials.
func (t *hubTools) credentials(ctx context.Context, sess *ma.Session) ([]secret, error) {
	var secrets []secret
	seen := map[string]bool{}
	for _, vid := range sess.VaultIDs {
		creds, err := liveCredentials(ctx, t.st, vid)
		if err != nil {
			return nil, err
		}
		for _, c := range creds {
			if c.Auth.Type != ma.AuthEnvVar || seen[c.Auth.SecretName] {
				continue // the first vault that has the name wins
			}
			seen[c.Auth.SecretName] = true
			sec, err := t.keys.OpenSecrets(c.Sealed, c.ID)
			if err != nil {
				return nil, fmt.Errorf("credential %s: %w", c.ID, err)
			}
			secrets = append(secrets, newSecret(c.Auth, sec.Value))
		}
	}
	return secrets, nil
}

// newSecret reads where a credential may be used (the API stores
// injection_location with headers on when it is not given).
func newSecret(a ma.CredentialAuth, value string) secret {
	s := secret{name: a.SecretName, value: value, header: true}
	if l := a.InjectionLocation; l != nil {
		s.header, s.body = l.Header, l.Body
	}
	if n := a.Networking; n != nil && n.Type == "limited" {
		s.hosts = append([]string{}, n.AllowedHosts...)
	}
	return s
}

// credentialEnv returns the variables that carry a session's credentials
// into its tools. In a sandbox each holds a placeholder, unique to the
// session and credential, which the sandbox's egress proxy replaces with
// the value in requests to the credential's hosts; the value never enters
// the sandbox. Without sandboxes the value is injected as it is.
func (t *hubTools) credentialEnv(sessionID string, secrets []secret) (map[string]string, error) {
	env := map[string]string{}
	if t.sandboxes == nil {
		for _, s := range secrets {
			env[s.name] = s.value
		}
		return env, nil
	}
	creds := make([]egress.Credential, 0, len(secrets))
	for _, s := range secrets {
		ph, err := newPlaceholder()
		if err != nil {
			return nil, err
		}
		env[s.name] = ph
		creds = append(creds, egress.Credential{Placeholder: ph, Value: s.value, Hosts: s.hosts, Header: s.header, Body: s.body})
	}
	t.sandboxes.setCredentials(sessionID, creds)
	return env, nil
}

// newPlaceholder returns a placeholder: URL-safe, fixed length, random,
// so that no placeholder contains another.
func newPlaceholder() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "reins_placeholder_" + hex.EncodeToString(b[:]), nil
}

// workRetirer retires the work item of a session that an executor takes,
// so that no pull worker is ever offered it.
type workRetirer interface {
	// Retire reports whether a worker acknowledged the item first.
	Retire(ctx context.Context, sessionID string) (acked bool, err error)
}

// placed reports whether an executor holds the session now.
func (t *hubTools) placed(sessionID string) bool {
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
func (t *hubTools) Place(ctx context.Context, sess *ma.Session) (*tool.Wait, error) {
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
	changed := t.hub.Changed(env.ID)
	l, err = t.hub.Assign(ctx, req)
	if errors.Is(err, executor.ErrNoExecutor) {
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
func (t *hubTools) assignRequest(sess *ma.Session, envID string) executor.AssignRequest {
	return executor.AssignRequest{EnvironmentID: envID, SessionID: sess.ID, Tools: harness.BuiltinTools(&sess.Agent)}
}

// placeLocal places a cloud environment's session on the environment's
// in-process executor, once the session holds one of the server's slots.
// l is the session's lease from an earlier placement, if any.
func (t *hubTools) placeLocal(ctx context.Context, sess *ma.Session, req executor.AssignRequest, l *executor.Lease) (*tool.Wait, error) {
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
func (t *hubTools) assignLocal(ctx context.Context, sess *ma.Session, req executor.AssignRequest) error {
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
func (t *hubTools) keep(sessionID string, l *executor.Lease) {
	t.mu.Lock()
	t.leases[sessionID] = l
	t.mu.Unlock()
}

func (t *hubTools) drop(sessionID string, l *executor.Lease) {
	t.mu.Lock()
	if t.leases[sessionID] == l {
		delete(t.leases, sessionID)
	}
	t.mu.Unlock()
}

// ensureLocal starts the in-process executor of a cloud environment.
func (t *hubTools) ensureLocal(envID string) error {
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
	c := executor.NewLocal(t.hub, executor.LocalOptions{EnvironmentID: envID, Sessions: sessions, Capabilities: executor.BuiltinCapabilities(),
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
func (t *hubTools) runTool(ctx context.Context, sess *ma.Session, call tool.Call) tool.Result {
	t.mu.Lock()
	l := t.leases[sess.ID]
	t.mu.Unlock()
	if l == nil {
		return tool.ErrorResult(fmt.Sprintf("The tool %s could not run: the session has no executor.", call.Name))
	}
	res, err := l.CallTool(ctx, executor.ToolCall{ID: call.ID, Name: call.Name, Input: call.Input})
	switch {
	case err == nil:
	case errors.Is(err, executor.ErrToolOutcomeUnknown), errors.Is(err, executor.ErrSessionEnded):
		t.drop(sess.ID, l)
		return tool.ErrorResult(executor.OutcomeUnknownText)
	case ctx.Err() != nil:
		return tool.ErrorResult("The tool call was interrupted.")
	default:
		return tool.ErrorResult(fmt.Sprintf("The tool %s could not run: %v", call.Name, err))
	}
	out := tool.Result{IsError: res.IsError}
	for _, b := range res.Content {
		out.Content = append(out.Content, ma.ContentBlock{Type: b.Type, Text: b.Text})
	}
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
func (t *hubTools) Idle(sessionID string) {
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
func (t *hubTools) yield(sessionID string) {
	t.mu.Lock()
	l := t.leases[sessionID]
	t.mu.Unlock()
	if l != nil && l.Yield() {
		t.drop(sessionID, l)
	}
}

// Release implements tool.Placer.
func (t *hubTools) Release(sessionID string) {
	t.mu.Lock()
	l := t.leases[sessionID]
	delete(t.leases, sessionID)
	delete(t.secrets, sessionID)
	delete(t.resources, sessionID)
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
func (t *hubTools) SessionEnded(ctx context.Context, sess *ma.Session, deleted bool) {
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
func (t *hubTools) EnvironmentDeleted(ctx context.Context, id string) {
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
func (t *hubTools) EnvironmentArchived(ctx context.Context, id string) {
	t.hub.DisconnectEnvironment(id, fmt.Sprintf("environment %s is archived", id))
}

// EnvironmentKeyRevoked implements httpapi.Lifecycle: the executors
// connected with the key are disconnected at once.
func (t *hubTools) EnvironmentKeyRevoked(ctx context.Context, k store.EnvironmentKey) {
	t.hub.RevokeCredential(k.Hash, fmt.Sprintf("environment key %s was revoked", k.ID))
}

// MachineRevoked implements httpapi.Lifecycle: the executors connected
// with the machine's token are disconnected at once.
func (t *hubTools) MachineRevoked(ctx context.Context, m store.Machine) {
	t.hub.RevokeCredential(m.Hash, fmt.Sprintf("machine %s was revoked", m.ID))
}

func (t *hubTools) removeWorkspace(envID, sessionID string) {
	if !safeName(envID) || !safeName(sessionID) {
		return
	}
	if err := os.RemoveAll(filepath.Join(t.workspace, envID, sessionID)); err != nil {
		t.log.Warn("remove a deleted session's workspace", "session", sessionID, "err", err)
	}
	if err := os.Remove(filepath.Join(t.workspace, envID, sessionID+markerSuffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.log.Warn("remove a deleted session's workspace marker", "session", sessionID, "err", err)
	}
}

// safeName reports whether an id can name a directory.
func safeName(id string) bool {
	return id != "" && id != "." && id != ".." && !strings.ContainsAny(id, `/\`)
}

// sweepWorkspaces removes the workspaces of sessions deleted while the
// server was down.
func (t *hubTools) sweepWorkspaces(ctx context.Context) {
	envs, _ := os.ReadDir(t.workspace)
	for _, env := range envs {
		sessions, _ := os.ReadDir(filepath.Join(t.workspace, env.Name()))
		for _, s := range sessions {
			id := strings.TrimSuffix(s.Name(), markerSuffix)
			_, err := t.st.GetSession(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				t.removeWorkspace(env.Name(), id)
			}
		}
	}
}

// Start checks the sandboxes and starts the package installer (or warns
// that there are no sandboxes), removes the workspaces of deleted
// sessions and, with replicas, starts announcing this replica's
// executors (hands.url must be set).
func (t *hubTools) Start(ctx context.Context) error {
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

// Stop stops the sandboxes' proxies and the package installs in flight
// (the tool calls waiting for them fail), then the local executors and
// the announcer, waits for them, and tears down the sandboxes.
func (t *hubTools) Stop(ctx context.Context) error {
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

// executorList shows the hub's executors to the API
// (GET /v1/environments/{id}/executors).
type executorList struct{ hub *executor.Hub }

func (l executorList) Executors(environmentID string) []httpapi.ExecutorView {
	var out []httpapi.ExecutorView
	for _, e := range l.hub.Executors() {
		if e.EnvironmentID != environmentID {
			continue
		}
		out = append(out, httpapi.ExecutorView{Type: "executor", ID: e.ID, EnvironmentID: e.EnvironmentID, MachineID: e.MachineID,
			Name: e.Executor.Name, Version: e.Executor.Version, OS: e.Executor.OS, Arch: e.Executor.Arch, Hostname: e.Executor.Hostname,
			Capabilities: e.Capabilities, MaxSessions: e.MaxSessions, Sessions: e.SessionIDs})
	}
	return out
}
