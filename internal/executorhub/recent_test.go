package executorhub

import (
	"strconv"
	"testing"
)

func TestRecentForgetsTheOldest(t *testing.T) {
	var r recent[int]
	for i := range maxKept + 3 {
		r.put(strconv.Itoa(i), i)
	}
	r.put("5", -5) // an update keeps its place
	for i, want := range map[int]bool{0: false, 2: false, 3: true, maxKept + 2: true} {
		if _, ok := r.get(strconv.Itoa(i)); ok != want {
			t.Errorf("get(%d) found %v, want %v", i, ok, want)
		}
	}
	if v, _ := r.get("5"); v != -5 || len(r.m) != maxKept || len(r.keys) != maxKept {
		t.Fatalf("get(5) = %d with %d kept (%d keys), want -5 with %d", v, len(r.m), len(r.keys), maxKept)
	}
}
