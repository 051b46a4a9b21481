package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/bus/pgnotify"
	"github.com/reinsdev/reins/internal/harness"
	ma "github.com/reinsdev/reins/managedagents"
)

// How long a replica relays a session's previews: a replica whose streams
// want them says so when a stream opens and again every watchRefresh
// while one is open; the replica that runs the session relays them until
// watchTTL after the last time it was told.
const (
	watchRefresh = 5 * time.Second
	watchTTL     = 3 * watchRefresh
	// maxWatched bounds the sessions this replica relays previews of.
	maxWatched = 1 << 16
)

// previewRelay carries previews between the replicas through the wake-up
// relay (see docs/decisions.md, "Previews cross replicas through NOTIFY,
// only where watched"): a Watch note tells the others that a stream here
// wants a session's previews; the replica that runs a watched session
// forwards them as data, which the others deliver to their streams.
type previewRelay struct {
	relay    *pgnotify.Relay
	previews *harness.Previews
	log      *slog.Logger

	mu      sync.Mutex           // guards watched and full
	watched map[string]time.Time // sessions other replicas stream: until when
	full    bool                 // a watch was refused since the last purge
}

var _ harness.PreviewRelay = (*previewRelay)(nil)

func newPreviewRelay(r *pgnotify.Relay, p *harness.Previews, log *slog.Logger) *previewRelay {
	pr := &previewRelay{relay: r, previews: p, log: log, watched: make(map[string]time.Time)}
	p.SetRelay(pr)
	return pr
}

// Watch implements harness.PreviewRelay.
func (r *previewRelay) Watch(sessionID string) {
	r.relay.Send(bus.Note{Key: sessionID, Kind: bus.Watch})
}

// Forward implements harness.PreviewRelay: a preview of a session that
// another replica watches is sent; it costs a map look-up otherwise.
func (r *previewRelay) Forward(sessionID string, pv ma.Preview) {
	r.mu.Lock()
	until, ok := r.watched[sessionID]
	r.mu.Unlock()
	if ok && time.Now().Before(until) {
		r.send(sessionID, pv)
	}
}

// send sends pv, split into smaller deltas when its text does not fit a
// notification. The relay drops what its bounded queue cannot hold, as a
// stream's own buffer does.
func (r *previewRelay) send(sessionID string, pv ma.Preview) {
	b, err := json.Marshal(pv)
	if err != nil {
		r.log.Warn("encode a preview for other replicas", "session", sessionID, "err", err)
		return
	}
	if len(b) <= pgnotify.MaxData {
		r.relay.SendData(sessionID, b)
		return
	}
	d := pv.Delta
	if pv.Type != "event_delta" || d == nil || d.Content.Type != "text" || len(d.Content.Text) < 2 {
		r.log.Warn("a preview too large for other replicas is not sent to them", "session", sessionID, "type", pv.Type, "bytes", len(b))
		return
	}
	// The text's halves, cut between runes: two deltas of one block
	// append to it as the whole would.
	cut := len(d.Content.Text) / 2
	for cut > 0 && !utf8.RuneStart(d.Content.Text[cut]) {
		cut--
	}
	if cut == 0 {
		cut = len(d.Content.Text) / 2
	}
	for _, part := range []string{d.Content.Text[:cut], d.Content.Text[cut:]} {
		half := *d
		half.Content.Text = part
		pv.Delta = &half
		r.send(sessionID, pv)
	}
}

// watchedBy records that another replica streams the session's previews.
func (r *previewRelay) watchedBy(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.watched[sessionID]; !ok && len(r.watched) >= maxWatched {
		if !r.full {
			r.full = true
			r.log.Warn("too many sessions watched by other replicas: the previews of more are not relayed", "max", maxWatched)
		}
		return
	}
	r.watched[sessionID] = time.Now().Add(watchTTL)
}

// receive delivers the previews another replica sent to the streams here.
func (r *previewRelay) receive(sessionID string, msgs [][]byte) {
	for _, m := range msgs {
		var pv ma.Preview
		err := json.Unmarshal(m, &pv)
		if err == nil && !(pv.Type == "event_start" && pv.Event != nil || pv.Type == "event_delta" && pv.Delta != nil) {
			err = errNotPreview
		}
		if err != nil {
			r.log.Warn("a preview from another replica is unreadable", "session", sessionID, "err", err)
			continue
		}
		r.previews.Deliver(sessionID, pv)
	}
}

// run repeats the watches of the streams here every watchRefresh and
// forgets the sessions no other replica watches any more, until ctx ends.
func (r *previewRelay) run(ctx context.Context) {
	t := time.NewTicker(watchRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range r.previews.Watched() {
			r.Watch(id)
		}
		now := time.Now()
		r.mu.Lock()
		for id, until := range r.watched {
			if now.After(until) {
				delete(r.watched, id)
			}
		}
		r.full = false
		r.mu.Unlock()
	}
}

// errNotPreview is what receive finds in a message that is JSON but no
// preview.
var errNotPreview = errors.New("not a preview")
