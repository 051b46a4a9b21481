package dreams

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// follow follows the dream's session, woken by its changes and every
// Config.Poll, until the dream is no longer active, this runner lost its
// claim, or the runner stops.
func (r *Runner) follow(ctx context.Context, id, sessionID string) {
	sub := r.cfg.Bus.Subscribe(sessionID)
	defer sub.Close()
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	f := &follower{r: r, id: id, sessionID: sessionID}
	for {
		done, err := f.step(ctx)
		switch {
		case ctx.Err() != nil || errors.Is(err, errLost):
			return
		case err != nil:
			r.log.Warn("dreams: cannot follow a dream's session", "dream", id, "session", sessionID, "err", err)
		case done:
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.C:
		case <-t.C:
		}
	}
}

// follower is the state of one dream's follow.
type follower struct {
	r             *Runner
	id, sessionID string
	// interrupted is when the follower last interrupted the session.
	interrupted time.Time
}

// step reads the dream and its session once and records what the
// session's state means for the dream: its usage; completed when the
// session went idle at the end of its turn; failed when it stopped
// otherwise, was deleted or ran past MaxDuration; inactive once the
// dream has ended and the session stopped. The session of an ended
// dream that still runs is interrupted. done: the dream is no longer
// active.
func (f *follower) step(ctx context.Context) (done bool, err error) {
	r := f.r
	d, err := r.cfg.Store.GetDream(ctx, f.id)
	if err != nil {
		return false, err
	}
	if !d.Active {
		return true, nil
	}
	if d.Owner != r.cfg.Owner {
		return true, errLost
	}
	sess, err := r.cfg.Store.GetSession(ctx, f.sessionID)
	if errors.Is(err, store.ErrNotFound) {
		_, err = r.update(ctx, f.id, func(d *store.Dream) error {
			end(d, &ma.DreamError{Type: ErrSessionDeleted, Message: "the dream's session " + f.sessionID + " was deleted"})
			d.Active = false
			return nil
		})
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	o, err := f.outcome(ctx, &sess)
	if err != nil {
		return false, err
	}
	apply := func(d *store.Dream) error {
		f.apply(d, &sess, o)
		return nil
	}
	if next := d; apply(&next) == nil && !reflect.DeepEqual(next, d) {
		if d, err = r.update(ctx, f.id, apply); err != nil {
			return false, err
		}
	}
	if d.Active && d.Ended() {
		f.interrupt(ctx)
	}
	return !d.Active, nil
}

// apply records in d what the session's state and outcome o say: its
// usage; the dream's end when the session stopped after its turn or ran
// past MaxDuration; and, once the dream has ended, that it is no longer
// active when the session stopped or StopGrace passed.
func (f *follower) apply(d *store.Dream, sess *ma.Session, o outcome) {
	cfg := f.r.cfg
	d.Usage = usageOf(sess)
	if o.final {
		end(d, o.err)
	} else if !d.Ended() && time.Since(timeOf(sess.CreatedAt)) > cfg.MaxDuration {
		end(d, &ma.DreamError{Type: ErrTimeout, Message: "the dream ran longer than " + cfg.MaxDuration.String() + ": its session was interrupted"})
	}
	stopped := o.final || sess.Status == ma.StatusTerminated
	if d.Ended() && (stopped || d.EndedAt != nil && time.Since(timeOf(*d.EndedAt)) > cfg.StopGrace) {
		d.Active = false
	}
}

// end ends a dream that has not ended: completed when e is nil, else
// failed with e.
func end(d *store.Dream, e *ma.DreamError) {
	if d.Ended() {
		return
	}
	now := ma.Time(time.Now())
	d.Status, d.EndedAt = ma.DreamCompleted, &now
	if e != nil {
		d.Status, d.Error = ma.DreamFailed, e
	}
}

// interrupt interrupts the session of an ended dream, at most once per
// Config.Poll: an interrupt that reached it before its turn began is
// sent again once it runs.
func (f *follower) interrupt(ctx context.Context) {
	if time.Since(f.interrupted) < f.r.cfg.Poll {
		return
	}
	f.interrupted = time.Now()
	if _, err := f.r.cfg.Sessions.Send(ctx, f.sessionID, []ma.Event{{Type: ma.EventUserInterrupt}}, nil); err != nil && ctx.Err() == nil {
		f.r.log.Warn("dreams: cannot interrupt a dream's session", "dream", f.id, "session", f.sessionID, "err", err)
	}
}

// outcome is what a session's state says of its dream: final once the
// session stopped after a turn (err nil: completed).
type outcome struct {
	final bool
	err   *ma.DreamError
}

// outcome reads the session's outcome: idle at the end of its turn is a
// completed dream; idle after its retries ran out, or terminated, a
// failed one with the session's last error; idle waiting for an action
// a failed one too (no one answers a dream's session).
func (f *follower) outcome(ctx context.Context, sess *ma.Session) (outcome, error) {
	switch {
	case sess.Status == ma.StatusTerminated:
	case sess.Status != ma.StatusIdle || sess.StopReason == nil:
		return outcome{}, nil
	case sess.StopReason.Type == ma.StopEndTurn:
		return outcome{final: true}, nil
	case sess.StopReason.Type == ma.StopRequiresAction:
		return outcome{final: true, err: &ma.DreamError{Type: ErrSession,
			Message: "the dream's session stopped to wait for an action (requires_action), which no one gives a dream"}}, nil
	}
	e, err := f.lastError(ctx)
	return outcome{final: true, err: e}, err
}

// lastError is the session's last session.error as a dream's error.
func (f *follower) lastError(ctx context.Context) (*ma.DreamError, error) {
	entries, err := f.r.cfg.Store.ListEvents(ctx, f.sessionID, store.EventQuery{Types: []string{ma.EventSessionError}, Desc: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 || entries[0].Event.Error == nil {
		return &ma.DreamError{Type: ErrSession, Message: "the dream's session stopped before it finished"}, nil
	}
	e := entries[0].Event.Error
	return &ma.DreamError{Type: e.Type, Message: e.Message}, nil
}

// usageOf is a session's model usage as a dream's.
func usageOf(sess *ma.Session) ma.DreamUsage {
	u := sess.Usage
	return ma.DreamUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadInputTokens: u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreation.Ephemeral5mInputTokens + u.CacheCreation.Ephemeral1hInputTokens}
}

// timeOf parses an API timestamp (the zero time if malformed).
func timeOf(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
