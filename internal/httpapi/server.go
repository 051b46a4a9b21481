// Package httpapi serves the Claude Managed Agents REST API and its SSE
// streams over the store and the harness, in the exact wire format the
// official Anthropic SDKs speak.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Default limits.
const (
	// DefaultMaxBody bounds request bodies that carry content (events,
	// sessions with initial events).
	DefaultMaxBody = 32 << 20
	// smallBody bounds every other request body.
	smallBody = 1 << 20
)

// Config configures a Server. Store, Bus, Harness and Auth are required.
type Config struct {
	// Store is the database (a store.Store is one). Each resource's
	// handlers see it through an interface of the few methods they call,
	// declared beside them.
	Store   Store
	Bus     *bus.Bus
	Harness Harness
	Auth    *Authenticator
	Logger  *slog.Logger
	// MaxBody bounds content-carrying request bodies (default 32 MiB).
	MaxBody int64
	// MaxFileSize bounds the content of one upload to /v1/files (default
	// DefaultMaxFileSize); FileSpoolDir holds uploads while they arrive
	// (default the system's temporary directory).
	MaxFileSize  int64
	FileSpoolDir string
	// BodyTimeout bounds the time a client takes to send a request body
	// (default 30 s); a slower one gets a 408 and loses its connection.
	// The response is not bounded: streams and long polls last.
	BodyTimeout time.Duration
	// Limits bounds each key's request rates and open streams (zero: no
	// bounds).
	Limits KeyLimits
	// MaxRequests bounds the API requests handled at once, streams and
	// work polls apart (zero: no bound); over it a request waits up to a
	// second, then gets 503 overloaded_error with retry-after.
	MaxRequests int
	// MaxStreams bounds the event streams and work polls open at once,
	// all keys together (zero: no bound): each holds a connection, an
	// open file, for as long as it lasts. Over it a stream gets 503
	// overloaded_error with retry-after at once.
	MaxStreams int
	// BodyBudget bounds the bytes of content-carrying request bodies
	// handled at once, counted by Content-Length (MaxBody when unknown);
	// a request that does not get its share within BudgetWait is refused
	// (503 overloaded_error). Default 128 MiB.
	BodyBudget int64
	// EventBudget bounds the bytes of large events (over a page of the
	// events list or a stream's read) read from the store for lists and
	// streams at once. Default 64 MiB.
	EventBudget int64
	// BudgetWait is how long a request waits for its share of a budget
	// (default 2 s).
	BudgetWait time.Duration
	// PingInterval is the SSE heartbeat period (default 15 s).
	PingInterval time.Duration
	// PollInterval is how often streams re-check the log without a wake-up
	// (default 2 s).
	PollInterval time.Duration
	// Vaults configures the vault endpoints (nil Keyring: no vault
	// endpoints).
	Vaults VaultConfig
	// Webhooks configures the webhook endpoints API (served with the
	// vaults': it seals secrets with their keyring).
	Webhooks WebhookConfig
	// Work runs the work queues of self-hosted environments (nil: no work
	// endpoints).
	Work WorkQueue
	// Executors serves /v1/executor/ (the executor hub: token endpoint and
	// WebSocket connect). Those paths authenticate with environment keys
	// and executor tokens, not API keys.
	Executors http.Handler
	// Gateway, if set, serves /v1/gateway/ (the model gateway of agent
	// ends), which authenticates with model tokens, not API keys.
	Gateway http.Handler
	// TurnTokens, if set, verifies the tools tokens of agent-end turns
	// for the platform tools endpoint (POST /v1/sessions/{id}/tool_calls);
	// nil: no such endpoint.
	TurnTokens ToolsTokens
	// ExecutorList, if set, serves GET /v1/environments/{id}/executors.
	ExecutorList ExecutorLister
	// Lifecycle, if set, is told when sessions and environments end.
	Lifecycle Lifecycle
	// Sessions changes sessions; nil makes one on Store, Bus, Harness and
	// Work.
	Sessions *sessions.Service
	// ValidatePackages, if set, checks an environment's config.packages
	// on create and update: what this host can install (the server's
	// app passes packages.Validate). Its error becomes a 400 under
	// "config.". Unset, packages are only checked when installed.
	ValidatePackages func(*ma.Packages) error
	// Models, if set, checks the model ids of agents as they are created
	// or changed: an id no configured provider serves is refused (400)
	// instead of failing the session's first turn.
	Models ModelChecker
	// Dreams runs the dreams POST /v1/dreams creates (nil: dreams are
	// refused).
	Dreams DreamRunner
	// Deployments is told when a deployment changes (nil: not told; a
	// scheduler reads them on its own).
	Deployments DeploymentScheduler
}

// Harness is what the API asks of the harness; *harness.Harness is one.
type Harness interface {
	// Runner wakes and interrupts runners (for the Sessions New makes
	// when Config.Sessions is nil).
	sessions.Runner
	// End stops the session's runner for good.
	End(sessionID string)
	// Previews fans out the deltas of the model steps in progress.
	Previews() *harness.Previews
	// AgentTurn returns the running agent-end turn of a session.
	AgentTurn(sessionID, turnID string) (*harness.ActiveTurn, error)
}

// ModelChecker tells whether a model id is served; model.Router is one.
type ModelChecker interface {
	Check(modelID string) error
}

// checkModel refuses a model id that no configured provider serves.
func (s *Server) checkModel(field, id string) error {
	if s.cfg.Models == nil {
		return nil
	}
	if err := s.cfg.Models.Check(id); err != nil {
		return badRequest("%s: %v", field, err)
	}
	return nil
}

// Lifecycle is told when sessions and environments end for good, and when
// environment keys are revoked, so that what they hold (sandboxes,
// workspaces, executor connections) goes with them.
type Lifecycle interface {
	// SessionEnded is called after sess was archived, or deleted when
	// deleted is set.
	SessionEnded(ctx context.Context, sess *ma.Session, deleted bool)
	// EnvironmentDeleted is called after an environment was deleted.
	EnvironmentDeleted(ctx context.Context, id string)
	// EnvironmentArchived is called after an environment was archived:
	// its outside executors are cut off.
	EnvironmentArchived(ctx context.Context, id string)
	// EnvironmentKeyRevoked is called after an environment key was
	// revoked: the executors connected with it are cut off.
	EnvironmentKeyRevoked(ctx context.Context, k store.EnvironmentKey)
	// MachineRevoked is called after a machine's token was revoked: the
	// executors connected with it are cut off.
	MachineRevoked(ctx context.Context, m store.Machine)
	// RepositoryTokenChanged is called after the token of a session's
	// github_repository resource was rotated: a running placement of the
	// session uses the new one.
	RepositoryTokenChanged(ctx context.Context, sessionID, resourceID string)
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	// keeper answers requests made with an Idempotency-Key, for the
	// handlers of every resource.
	*keeper
	// skills pins the skills of agents and sessions to versions.
	skills *skillAPI
	// sessionRows and resourceRows are cfg.Store as the session and
	// resource handlers see it.
	sessionRows  sessionStore
	resourceRows resourceStore

	tails  *tails
	limits *limiter
	shed   *shedder
	mem    *memory
	// streams counts the event streams open.
	streams atomic.Int64

	// done is closed by Stop: streams end cleanly.
	done     chan struct{}
	doneOnce sync.Once
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	if cfg.FileSpoolDir == "" {
		cfg.FileSpoolDir = os.TempDir()
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.BodyBudget <= 0 {
		cfg.BodyBudget = DefaultBodyBudget
	}
	if cfg.EventBudget <= 0 {
		cfg.EventBudget = DefaultEventBudget
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = defaultBudgetWait
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 15 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Sessions == nil {
		sc := sessions.Config{Store: cfg.Store, Bus: cfg.Bus, Runner: cfg.Harness}
		if w, ok := cfg.Work.(sessions.WorkQueue); ok {
			sc.Work = w
		}
		cfg.Sessions = sessions.New(sc)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(), keeper: newKeeper(cfg.Store, cfg.Logger),
		sessionRows: cfg.Store, resourceRows: cfg.Store,
		limits: newLimiter(cfg.Limits), shed: newShedder(cfg.MaxRequests, cfg.MaxStreams), done: make(chan struct{})}
	s.tails = newTails(cfg.Store, cfg.Bus, cfg.PollInterval)
	s.mem = newMemory(cfg)
	s.routes()
	return s
}

// Start does nothing: the server's goroutines (the readers that feed
// streams, the return of memory to the OS) start on demand, and Stop ends
// them. It makes the Server a service.
func (s *Server) Start(context.Context) error { return nil }

// Stop ends every open stream (they send nothing more and close), waits
// for the readers that fed them, and cancels a pending return of memory
// to the OS. Those end at once: Stop does not wait on ctx. It may be
// called more than once.
func (s *Server) Stop(context.Context) error {
	s.doneOnce.Do(func() {
		close(s.done)
		s.tails.close()
		s.mem.close()
	})
	return nil
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (s *Server) handle(pattern string, maxBody int64, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// noBody is h for an endpoint that takes no request body: a body, if
// any, must be empty, {} or null, so that a field sent there is refused
// rather than ignored.
func noBody(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := decode(r, &struct{}{}); err != nil {
			return err
		}
		return h(w, r)
	}
}

func (s *Server) routes() {
	big := s.cfg.MaxBody
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"status": "ok"})
	})
	s.mux.Handle("GET /readyz", readiness{st: s.cfg.Store, log: s.log})
	s.agentRoutes()

	s.environmentRoutes()
	s.workRoutes()
	s.environmentKeyRoutes()
	s.executorRoutes()
	s.apiKeyRoutes()
	s.workspaceRoutes()
	s.machineRoutes()

	s.handle("POST /v1/sessions", big, s.bodyBudget(s.createSession))
	s.handle("GET /v1/sessions", smallBody, s.listSessions)
	s.handle("GET /v1/sessions/{id}", smallBody, s.getSession)
	s.handle("POST /v1/sessions/{id}", smallBody*4, s.updateSession)
	s.handle("POST /v1/sessions/{id}/archive", smallBody, noBody(s.archiveSession))
	s.handle("DELETE /v1/sessions/{id}", smallBody, noBody(s.deleteSession))
	s.eventRoutes()
	s.toolCallRoutes()

	s.fileRoutes()
	s.skillRoutes()
	s.resourceRoutes()
	s.memoryRoutes()
	s.dreamRoutes()
	s.deploymentRoutes()

	if s.cfg.Vaults.Keyring != nil {
		s.vaultRoutes(s.cfg.Vaults)
		s.webhookRoutes(s.cfg.Webhooks, s.cfg.Vaults.Keyring)
	}

	s.handle("/", smallBody, func(w http.ResponseWriter, r *http.Request) error {
		return notFound("no route for %s %s", r.Method, r.URL.Path)
	})
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	principalKey
)

// principal returns who r acts for (the zero Principal on /healthz).
func principal(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey).(Principal)
	return p
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}

// ServeHTTP implements http.Handler: request id, body timeout,
// authentication, per-key limits, panic recovery and routing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := ids.New(ids.Request)
	w.Header().Set("request-id", id)
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "request_id", id, "panic", v)
			s.writeError(w, r, errf(http.StatusInternalServerError, ma.ErrAPI, "internal server error"))
		}
	}()
	s.guardBody(w, r)
	if strings.HasPrefix(r.URL.Path, "/v1/executor/") && s.cfg.Executors != nil {
		s.cfg.Executors.ServeHTTP(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/gateway/") && s.cfg.Gateway != nil {
		s.cfg.Gateway.ServeHTTP(w, r)
		return
	}
	_, pattern := s.mux.Handler(r)
	if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && pattern != toolCallsPattern { // the tools endpoint checks its token
		leave, err := s.shed.enter(r.Context(), pattern)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer leave()
		p, release, err := s.authorize(r, pattern)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		defer release()
		ctx := context.WithValue(r.Context(), principalKey, p)
		if p.Workspace != "" {
			// The one rule that keeps workspaces apart: the store scopes
			// every call made with this context to the workspace.
			ctx = store.WithWorkspace(ctx, p.Workspace)
		}
		r = r.WithContext(ctx)
	}
	// Go's mux answers a wrong method with its own 405 text; answer in
	// the JSON envelope instead.
	if pattern == "/" && strings.HasPrefix(r.URL.Path, "/v1/") && s.knownPath(r) {
		s.writeError(w, r, errf(http.StatusMethodNotAllowed, ma.ErrInvalidRequest, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorize authenticates r, counts it against its key's limits (so that
// requests its scope refuses count too) and checks the scope of an
// environment key. release ends what r holds of the limits (a stream's
// slot).
func (s *Server) authorize(r *http.Request, pattern string) (p Principal, release func(), err error) {
	p, err = s.cfg.Auth.Check(r.Context(), r)
	if err != nil {
		return p, nil, err
	}
	release, err = s.limits.admit(p.limitKey(), pattern)
	switch {
	case err != nil:
	case p.MachineID != "":
		err = errf(http.StatusForbidden, ma.ErrPermission,
			"a machine token authenticates an executor on the executor protocol only (POST /v1/executor/tokens); this API needs an API key")
	case p.EnvironmentID != "":
		if err = envKeyWorkspace(r, p); err == nil {
			err = s.scope(r, p.EnvironmentID)
		}
	case p.Grant != nil:
		if err = envKeyWorkspace(r, p); err == nil {
			err = s.sessionsScope(r, *p.Grant)
		}
	default:
		err = s.authorizeKey(r, &p)
	}
	if err != nil {
		release()
		return p, nil, err
	}
	return p, release, nil
}

// envKeyWorkspace refuses a request of an environment key (or sessions
// token) whose anthropic-workspace-id header names another workspace than
// its environment's (its session's), the one it works in.
func envKeyWorkspace(r *http.Request, p Principal) error {
	hdr := strings.TrimSpace(r.Header.Get(WorkspaceHeader))
	if hdr == "" || hdr == p.Workspace {
		return nil
	}
	if p.Grant != nil {
		return errf(http.StatusForbidden, ma.ErrPermission,
			"this sessions token works in workspace %s, its session's; the %s header asks for workspace %s", p.Workspace, WorkspaceHeader, hdr)
	}
	return errf(http.StatusForbidden, ma.ErrPermission,
		"this environment key works in workspace %s, its environment's; the %s header asks for workspace %s", p.Workspace, WorkspaceHeader, hdr)
}

// knownPath reports whether some other method serves r's path.
func (s *Server) knownPath(r *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "/" {
			return true
		}
	}
	return false
}

// scope limits an environment key to its environment's work queue, to
// the session calls a worker makes (get, events list/send/stream) on that
// environment's sessions, and to reading skill versions (list, get,
// content), which the official worker downloads for its sessions. Another
// environment's session is "not found". Which events it may send is
// checked by sendEvents ([Principal.mayPost]).
func (s *Server) scope(r *http.Request, envID string) error {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	denied := errf(http.StatusForbidden, ma.ErrPermission, "an environment key can only use its environment's work queue and sessions, and read skill versions")
	switch {
	case len(parts) >= 4 && parts[0] == "v1" && parts[1] == "skills" && parts[3] == "versions":
		if r.Method != http.MethodGet || len(parts) > 6 || len(parts) == 6 && parts[5] != "content" {
			return denied
		}
		return nil
	case len(parts) >= 4 && parts[0] == "v1" && parts[1] == "environments" && parts[3] == "work":
		if parts[2] != envID {
			return denied
		}
		return nil
	case len(parts) >= 3 && parts[0] == "v1" && parts[1] == "sessions":
		tail := strings.Join(parts[3:], "/")
		ok := (tail == "" && r.Method == http.MethodGet) || (tail == "events" && (r.Method == http.MethodGet || r.Method == http.MethodPost)) ||
			(tail == "events/stream" && r.Method == http.MethodGet)
		if !ok {
			return denied
		}
		sess, err := s.sessionRows.GetSession(r.Context(), parts[2])
		if err != nil {
			return err
		}
		if sess.EnvironmentID != envID {
			return notFound("session %s not found", parts[2])
		}
		return nil
	}
	return denied
}
