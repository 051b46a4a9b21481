package executor

import (
	"strconv"
	"testing"
)

func TestRecentIDsForgetsTheOldest(t *testing.T) {
	var r recentIDs
	kept := map[string]bool{}
	for i := range 10 {
		id := strconv.Itoa(i)
		kept[id] = true
		if old := r.add(id, 4); old != "" {
			delete(kept, old)
		}
	}
	if len(kept) != 4 || !kept["6"] || !kept["9"] || kept["5"] {
		t.Fatalf("kept %v, want the last four", kept)
	}
}
