package store

import (
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

// TestViewPreviews: a stream sends the previews of its view's thread only:
// the session's stream the primary thread's.
func TestViewPreviews(t *testing.T) {
	primary, child := ma.Preview{Type: "event_start"}, ma.Preview{Type: "event_start", Thread: "sthr_child"}
	for _, c := range []struct {
		name           string
		v              View
		primary, child bool
	}{
		{"session", SessionView(), true, false},
		{"primary", ThreadView("sesn_abc", "sthr_abc"), true, false},
		{"child", ThreadView("sesn_abc", "sthr_child"), false, true},
		{"whole log", View{}, true, true},
	} {
		if got := c.v.IncludesPreview(primary); got != c.primary {
			t.Errorf("%s view sends the primary's preview: %v, want %v", c.name, got, c.primary)
		}
		if got := c.v.IncludesPreview(child); got != c.child {
			t.Errorf("%s view sends the child's preview: %v, want %v", c.name, got, c.child)
		}
	}
}
