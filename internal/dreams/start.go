package dreams

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Error types of failed dreams (beside a failed session's error type).
const (
	// ErrInputUnavailable: an input was deleted (or the store to update
	// archived) before the dream read it.
	ErrInputUnavailable = "input_unavailable"
	// ErrTimeout: the dream's session ran longer than Config.MaxDuration.
	ErrTimeout = "timeout"
	// ErrSessionDeleted: the dream's session was deleted while it ran.
	ErrSessionDeleted = "session_deleted"
	// ErrInternal: reins could not start the dream (its log has why).
	ErrInternal = "internal_error"
	// ErrSession: the dream's session stopped without an answer or an
	// error of its own (requires_action).
	ErrSession = "session_error"
)

// inputError is a start refused because an input is gone.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

// inputs are what a dream reads, as its start found them.
type inputs struct {
	store    ma.MemoryStore
	sessions []ma.Session
}

// start starts a pending dream: it checks its inputs, makes its output
// store (a copy of the input store for create_new), stores the
// transcripts of its sessions as files, and creates its session, with
// the ids of d.Plan, then records the dream running. A start cut off
// by a restart is resumed: what it made with those ids is made again,
// or, once the session exists, only recorded. If the dream was canceled
// meanwhile, what it made is removed and the dream stops counting as
// active. It returns the dream as it left it.
func (r *Runner) start(ctx context.Context, d store.Dream) (store.Dream, error) {
	if _, err := r.cfg.Store.GetSession(ctx, d.Plan.SessionID); err == nil {
		return r.begun(ctx, d.ID)
	} else if !errors.Is(err, store.ErrNotFound) {
		return d, err
	}
	in, err := r.inputs(ctx, &d)
	if err != nil {
		return d, err
	}
	out, err := r.output(ctx, &d, in.store)
	if err != nil {
		return d, err
	}
	files, err := r.transcripts(ctx, &d, in.sessions)
	if err != nil {
		return d, err
	}
	envID, err := r.environment(ctx, d.WorkspaceID)
	if err != nil {
		return d, err
	}
	cur, err := r.cfg.Store.GetDream(ctx, d.ID)
	if err != nil {
		return d, err
	}
	if cur.Ended() {
		return r.abandon(ctx, cur)
	}
	if err := r.createSession(ctx, &d, envID, in, out, files); err != nil {
		return d, err
	}
	return r.begun(ctx, d.ID)
}

// inputs reads the dream's inputs: the memory store (not archived, for
// one updated in place) and the sessions. One that is gone is an
// *inputError.
func (r *Runner) inputs(ctx context.Context, d *store.Dream) (inputs, error) {
	var in inputs
	ms, err := r.cfg.Store.GetMemoryStore(ctx, d.MemoryStoreInput())
	if errors.Is(err, store.ErrNotFound) {
		return in, &inputError{fmt.Sprintf("memory store %s was deleted before the dream started", d.MemoryStoreInput())}
	}
	if err != nil {
		return in, err
	}
	if d.UpdatesStore() != "" && ms.ArchivedAt != nil {
		return in, &inputError{fmt.Sprintf("memory store %s was archived before the dream started: an archived store cannot be updated", ms.ID)}
	}
	in.store = ms
	for _, id := range d.SessionInputs() {
		sess, err := r.cfg.Store.GetSession(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return in, &inputError{fmt.Sprintf("session %s was deleted before the dream read it", id)}
		}
		if err != nil {
			return in, err
		}
		in.sessions = append(in.sessions, sess)
	}
	return in, nil
}

// output returns the memory store the dream writes: the input store for
// update_existing; for create_new the store d.Plan.StoreID, made anew as
// a copy of the input store (one left by a cut-off start is replaced).
func (r *Runner) output(ctx context.Context, d *store.Dream, input ma.MemoryStore) (ma.MemoryStore, error) {
	if d.UpdatesStore() != "" {
		return input, nil
	}
	if err := r.removeStore(ctx, d.Plan.StoreID); err != nil {
		return ma.MemoryStore{}, err
	}
	now := ma.Time(time.Now())
	out := ma.MemoryStore{ID: d.Plan.StoreID, Type: "memory_store", Name: copyName(input.Name, d.ID), Description: input.Description,
		Metadata: ma.Metadata{}, CreatedAt: now, UpdatedAt: now}
	if err := r.cfg.Store.CreateMemoryStore(ctx, out); err != nil {
		return out, err
	}
	return out, r.copyMemories(ctx, input.ID, out.ID, d.Plan.APIKeyID)
}

// removeStore deletes the memory store id if it exists.
func (r *Runner) removeStore(ctx context.Context, id string) error {
	err := r.cfg.Store.DeleteMemoryStore(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// copyName is the name of a create_new dream's store: the input store's
// and the dream's id, within the 255 characters of a name.
func copyName(name, dreamID string) string {
	suffix := " (dream " + dreamID + ")"
	if room := 255 - len([]rune(suffix)); len([]rune(name)) > room {
		name = string([]rune(name)[:room])
	}
	return name + suffix
}

// copyMemories copies every memory of the store from into the store to,
// as created by the API key keyID (none when "").
func (r *Runner) copyMemories(ctx context.Context, from, to, keyID string) error {
	var actor *ma.Actor
	if keyID != "" {
		actor = &ma.Actor{Type: ma.ActorAPI, APIKeyID: keyID}
	}
	after := ""
	for {
		page, err := r.cfg.Store.ListMemories(ctx, from, store.MemoryQuery{After: after, Limit: 100, Full: true})
		if err != nil {
			return err
		}
		for _, it := range page {
			m := it.Memory
			if m == nil {
				continue
			}
			if _, err := r.cfg.Store.CreateMemory(ctx, store.MemoryWrite{StoreID: to, MemoryID: ids.New(ids.Memory), VersionID: ids.New(ids.MemoryVersion),
				Path: &m.Path, Content: m.Content, Actor: actor, At: time.Now()}); err != nil {
				return fmt.Errorf("copy memory %s: %w", m.Path, err)
			}
		}
		if len(page) < 100 {
			return nil
		}
		after = page[len(page)-1].Key()
	}
}

// transcripts stores the transcript of each session as a file of the
// dream's session (scope d.Plan.SessionID; the ones a cut-off start left
// are replaced) and returns them as the session's file resources.
func (r *Runner) transcripts(ctx context.Context, d *store.Dream, sess []ma.Session) ([]ma.SessionResource, error) {
	if err := r.removeFiles(ctx, d.Plan.SessionID); err != nil {
		return nil, err
	}
	var out []ma.SessionResource
	for i := range sess {
		text, err := r.render(ctx, &sess[i])
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(text))
		now := ma.Time(time.Now())
		f := store.File{File: ma.File{ID: ids.New(ids.File), Type: "file", Filename: sess[i].ID + ".md", MimeType: "text/markdown",
			SizeBytes: int64(len(text)), CreatedAt: now, Downloadable: true, Scope: &ma.FileScope{ID: d.Plan.SessionID, Type: "session"}},
			SHA256: hex.EncodeToString(sum[:])}
		if err := r.cfg.Store.CreateFile(ctx, f, strings.NewReader(text)); err != nil {
			return nil, err
		}
		out = append(out, ma.SessionResource{ID: ids.New(ids.SessionResource), Type: "file", FileID: f.ID,
			MountPath: TranscriptDir + "/" + sess[i].ID + ".md", CreatedAt: now, UpdatedAt: now})
	}
	return out, nil
}

// removeFiles deletes the files of the session scope.
func (r *Runner) removeFiles(ctx context.Context, scope string) error {
	for {
		items, err := r.cfg.Store.ListFiles(ctx, store.FileQuery{ScopeID: scope, ListQuery: store.ListQuery{Limit: 100}})
		if err != nil || len(items) == 0 {
			return err
		}
		for _, it := range items {
			if err := r.cfg.Store.DeleteFile(ctx, it.Value.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
	}
}

// render reads the session's events as its events list shows them (each
// once, where it was last echoed) and renders its transcript.
func (r *Runner) render(ctx context.Context, sess *ma.Session) (string, error) {
	t := newTranscript(sess)
	var after int64
	for !t.full {
		entries, err := r.cfg.Store.ListEvents(ctx, sess.ID, store.EventQuery{After: after, Limit: 500})
		if err != nil {
			return "", err
		}
		if len(entries) == 0 {
			break
		}
		for i := range entries {
			t.add(&entries[i].Event)
		}
		after = entries[len(entries)-1].Seq
	}
	return t.String(), nil
}

// createSession creates the dream's session, d.Plan.SessionID: the dream
// agent with the dream's model, in the dreams' environment envID, with
// the output store out mounted read_write and the transcripts files,
// and the first message.
func (r *Runner) createSession(ctx context.Context, d *store.Dream, envID string, in inputs, out ma.MemoryStore, files []ma.SessionResource) error {
	ag, err := agent(d.Model)
	if err != nil {
		return err
	}
	mount := ma.MemoryMountRoot + "/" + memories.Slug(out.Name)
	res := []ma.SessionResource{{Type: "memory_store", MemoryStoreID: out.ID, Access: "read_write", Name: out.Name,
		Description: out.Description, MountPath: mount}}
	res = append(res, files...)
	raws := make([]ma.Raw, len(res))
	for i := range res {
		if raws[i], err = json.Marshal(res[i]); err != nil {
			return err
		}
	}
	text := firstMessage(&d.Dream, out, mount, in.store, d.SessionInputs())
	draft := sessions.Draft{Agent: ag, EnvironmentID: envID, Title: "Dream " + d.ID, Metadata: map[string]string{"dream_id": d.ID},
		Resources: raws, Initial: []ma.Event{{Type: ma.EventUserMessage, Content: []ma.ContentBlock{{Type: "text", Text: text}}}}}
	sess, err := r.cfg.Sessions.Prepare(ctx, draft)
	if err != nil {
		return err
	}
	sess.ID = d.Plan.SessionID
	_, err = r.cfg.Sessions.Create(ctx, sess, draft.Initial, nil)
	return err
}

// begun records that the dream's session exists: its id, its output
// store, and, unless the dream was canceled meanwhile, that it runs.
func (r *Runner) begun(ctx context.Context, id string) (store.Dream, error) {
	return r.update(ctx, id, func(d *store.Dream) error {
		sid := d.Plan.SessionID
		d.SessionID = &sid
		d.Outputs = []ma.DreamOutput{{Type: "memory_store", MemoryStoreID: outputStore(d)}}
		if d.Status == ma.DreamPending {
			d.Status = ma.DreamRunning
		}
		return nil
	})
}

// outputStore is the id of the memory store the dream writes.
func outputStore(d *store.Dream) string {
	if s := d.UpdatesStore(); s != "" {
		return s
	}
	return d.Plan.StoreID
}

// abandon removes what a start made for a dream that ended (canceled)
// or cannot start before its session was created, and makes the dream
// inactive.
func (r *Runner) abandon(ctx context.Context, d store.Dream) (store.Dream, error) {
	if d.UpdatesStore() == "" {
		if err := r.removeStore(ctx, d.Plan.StoreID); err != nil {
			return d, err
		}
	}
	if err := r.removeFiles(ctx, d.Plan.SessionID); err != nil {
		return d, err
	}
	return r.update(ctx, d.ID, func(cur *store.Dream) error {
		cur.Active = false
		return nil
	})
}

// startFailed ends a dream whose start failed for good: an input that
// is gone, or an error other than the runner stopping, losing its claim
// or the database being unavailable (those leave the dream pending, for
// the next claim to start again).
func (r *Runner) startFailed(ctx context.Context, d store.Dream, err error) {
	var ie *inputError
	var re *sessions.RejectedError
	switch {
	case ctx.Err() != nil || errors.Is(err, errLost):
		return
	case errors.Is(err, store.ErrUnavailable):
		r.log.Warn("dreams: a start waits for the database", "dream", d.ID, "err", err)
		return
	case errors.As(err, &ie):
		err = r.fail(ctx, d, ErrInputUnavailable, ie.msg)
	case errors.As(err, &re):
		err = r.fail(ctx, d, ErrInternal, "the dream's session could not be created: "+re.Message)
	default:
		r.log.Error("dreams: cannot start a dream", "dream", d.ID, "err", err)
		err = r.fail(ctx, d, ErrInternal, "reins could not start the dream's session (the server's log has the cause)")
	}
	if err != nil && ctx.Err() == nil {
		r.log.Warn("dreams: cannot record a dream's failed start", "dream", d.ID, "err", err)
	}
}

// fail ends a dream whose start failed as failed, and removes what its
// start made, unless its session exists (then the dream stays active:
// the next claim follows the session until it stops).
func (r *Runner) fail(ctx context.Context, d store.Dream, typ, msg string) error {
	if _, err := r.update(ctx, d.ID, func(cur *store.Dream) error {
		if !cur.Ended() {
			now := ma.Time(time.Now())
			cur.Status, cur.Error, cur.EndedAt = ma.DreamFailed, &ma.DreamError{Type: typ, Message: msg}, &now
		}
		return nil
	}); err != nil {
		return err
	}
	_, err := r.cfg.Store.GetSession(ctx, d.Plan.SessionID)
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	_, err = r.abandon(ctx, d)
	return err
}
