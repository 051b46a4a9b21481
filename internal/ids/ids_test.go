package ids

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

func TestNewIsUnbiased(t *testing.T) {
	r := rand.NewChaCha8([32]byte{1}) // seeded: the test is deterministic
	counts := map[rune]int{}
	for range len(alphabet) * 256 {
		id := newFrom(r, "x_")
		for _, c := range id[2:] {
			counts[c]++
		}
	}
	// Each character's share of 57·256·24 characters is 6144, with a
	// standard deviation of about 78. byte%57 would draw 28 of the
	// characters 25% more often than the others.
	want := 24 * 256
	for _, c := range alphabet {
		if d := counts[c] - want; d > want/20 || d < -want/20 {
			t.Errorf("character %q drawn %d times, want %d", c, counts[c], want)
		}
	}
}

func TestNewFormat(t *testing.T) {
	shape := regexp.MustCompile(`^sesn_[` + regexp.QuoteMeta(alphabet) + `]{24}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := New(Session)
		if !shape.MatchString(id) {
			t.Fatalf("id %q does not have the shape sesn_ + 24 alphabet characters", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}
