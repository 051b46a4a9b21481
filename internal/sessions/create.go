package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Limits of a session's fields.
const (
	// MaxTitle bounds a title, in characters.
	MaxTitle = 1024
	// MaxResources bounds a session's resources.
	MaxResources = 100
	// MaxVaults bounds a session's vault_ids.
	MaxVaults = 20
	// MaxInitialEvents bounds the initial_events of a create.
	MaxInitialEvents = 50
)

// Draft is a session a create request asks for, as decoded: its agent
// resolved (the agent's own rules are the caller's), its resources
// validated one by one, its initial events decoded.
type Draft struct {
	Agent ma.SessionAgent
	// EnvironmentID names the environment; required.
	EnvironmentID string
	Title         string
	Metadata      map[string]string
	Resources     []ma.Raw
	// Tokens tells that some github_repository resource has an
	// authorization_token (stored apart from the session by the caller):
	// only a cloud environment's egress proxy can give it to the clone.
	Tokens   bool
	VaultIDs []string
	// Budget is the session's spend limit (nil for none), as
	// [ParseBudget] decodes it.
	Budget *ma.Budget
	// Initial are the events the session starts with.
	Initial []ma.Event
	// DeploymentID is the deployment whose run creates the session (""
	// for a session created by a request).
	DeploymentID string
}

// Prepare checks a draft against the rules of a new session and the
// environment and vaults it names, and returns the session to create.
// Nothing is written.
func (s *Service) Prepare(ctx context.Context, d Draft) (ma.Session, error) {
	if d.EnvironmentID == "" {
		return ma.Session{}, rejected("environment_id: required")
	}
	if err := checkTitle(d.Title); err != nil {
		return ma.Session{}, err
	}
	if err := CheckMetadata("metadata", d.Metadata); err != nil {
		return ma.Session{}, err
	}
	if len(d.Resources) > MaxResources {
		return ma.Session{}, rejected("resources: at most %d resources, got %d", MaxResources, len(d.Resources))
	}
	if err := CheckBudget(d.Budget); err != nil {
		return ma.Session{}, err
	}
	if d.Budget != nil {
		if err := checkBudgetable(s.cfg.Prices, d.Agent, s.cfg.GraderModel); err != nil {
			return ma.Session{}, err
		}
	}
	if err := s.checkVaults(ctx, d.VaultIDs); err != nil {
		return ma.Session{}, err
	}
	if err := CheckInitial(d.Initial, d.DeploymentID != ""); err != nil {
		return ma.Session{}, err
	}
	env, err := s.cfg.Store.GetEnvironment(ctx, d.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return ma.Session{}, notFound("environment_id: environment %s not found", d.EnvironmentID)
	}
	if err != nil {
		return ma.Session{}, err
	}
	if env.ArchivedAt != nil {
		return ma.Session{}, rejected("environment_id: environment %s is archived; new sessions cannot use it", env.ID)
	}
	if d.Tokens && env.Config.Type != "cloud" {
		return ma.Session{}, rejected("resources: authorization_token needs a cloud environment: the token is given to the clone by the cloud sandbox's egress proxy")
	}
	sess := newSession(d, env.ID)
	FillUsage(s.cfg.Prices, &sess.Usage, time.Now())
	return sess, nil
}

// newSession is the idle session d asks for, with its defaults.
func newSession(d Draft, envID string) ma.Session {
	meta := ma.Metadata(d.Metadata)
	if meta == nil {
		meta = ma.Metadata{}
	}
	vaultIDs := d.VaultIDs
	if vaultIDs == nil {
		vaultIDs = []string{}
	}
	resources := d.Resources
	if resources == nil {
		resources = []ma.Raw{}
	}
	now := ma.Time(time.Now())
	sess := ma.Session{ID: ids.New(ids.Session), Type: "session", Title: d.Title, Status: ma.StatusIdle, EnvironmentID: envID,
		Agent: d.Agent, Resources: resources, Metadata: meta, VaultIDs: vaultIDs, OutcomeEvaluations: []ma.OutcomeEvaluation{},
		Budget: d.Budget, CreatedAt: now, UpdatedAt: now}
	if d.DeploymentID != "" {
		sess.DeploymentID = &d.DeploymentID
	}
	return sess
}

// checkVaults checks the vault_ids of a new session: at most MaxVaults,
// each one's vault exists and is not archived.
func (s *Service) checkVaults(ctx context.Context, vaultIDs []string) error {
	if len(vaultIDs) > MaxVaults {
		return rejected("vault_ids: at most %d vaults, got %d", MaxVaults, len(vaultIDs))
	}
	for i, id := range vaultIDs {
		v, err := s.cfg.Store.GetVault(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("vault_ids[%d]: vault %s not found", i, id)
		}
		if err != nil {
			return err
		}
		if v.ArchivedAt != nil {
			return rejected("vault_ids[%d]: vault %s is archived", i, id)
		}
	}
	return nil
}

// CheckInitial checks the initial events of a new session: at most
// MaxInitialEvents user messages and outcome definitions, and system
// messages too for a deployment's (whose initial events are checked by
// it at the deployment's create and update).
func CheckInitial(evs []ma.Event, deployment bool) error {
	if len(evs) > MaxInitialEvents {
		return rejected("initial_events: at most %d events, got %d", MaxInitialEvents, len(evs))
	}
	for i, ev := range evs {
		switch {
		case ev.Type == ma.EventUserMessage, ev.Type == ma.EventUserDefineOutcome:
		case ev.Type == ma.EventSystemMessage && deployment:
		case deployment:
			return rejected("initial_events[%d].type: only user.message, user.define_outcome and system.message are accepted here; got %q", i, ev.Type)
		default:
			return rejected("initial_events[%d].type: only user.message and user.define_outcome are accepted here; got %q", i, ev.Type)
		}
	}
	return nil
}

// Create stores a session made by Prepare with its initial events (user
// messages), then wakes its runner if it has input and gives it a work
// item if its environment is self-hosted. rec, if set, runs last in the
// transaction.
func (s *Service) Create(ctx context.Context, sess ma.Session, initial []ma.Event, rec Record) (ma.Session, error) {
	sess, err := s.cfg.Store.CreateSession(ctx, sess, withOutcomes(func(tx store.Tx) error {
		for i := range initial {
			if initial[i].Type == ma.EventUserDefineOutcome {
				if err := acceptOutcome(tx.Session(), outcomeField(i), &initial[i]); err != nil {
					return err
				}
			}
			if err := tx.Append(&initial[i]); err != nil {
				return err
			}
		}
		if rec == nil {
			return nil
		}
		return rec(tx, 1)
	}))
	if err != nil {
		return sess, err
	}
	if len(initial) > 0 {
		s.cfg.Runner.Wake(sess.ID)
	}
	return sess, s.enqueueWork(ctx, &sess)
}

// checkTitle checks a session's title.
func checkTitle(title string) error {
	if n := len([]rune(title)); n > MaxTitle {
		return rejected("title: must be 0 to %d characters, got %d", MaxTitle, n)
	}
	return nil
}

// CheckMetadata checks a set of metadata: at most 16 keys of 1 to 64
// characters, values of at most 512.
func CheckMetadata(field string, m map[string]string) error {
	if len(m) > 16 {
		return rejected("%s: at most 16 keys, got %d", field, len(m))
	}
	for k, v := range m {
		if k == "" || len(k) > 64 {
			return rejected("%s: key %q must be 1 to 64 characters", field, k)
		}
		if len(v) > 512 {
			return rejected("%s.%s: value longer than 512 characters", field, k)
		}
	}
	return nil
}

// ApplyMetadata returns cur with patch applied: a nil or empty value
// deletes its key.
func ApplyMetadata(cur ma.Metadata, patch map[string]*string) ma.Metadata {
	out := ma.Metadata{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil || *v == "" {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}
