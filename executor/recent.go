package executor

// recentIDs remembers the order of the last n ids it was given, so that a
// map keyed by them can forget the oldest without growing.
type recentIDs struct {
	ring []string
	next int // the oldest, once the ring is full
}

// add records id and returns the id it pushed out ("" while fewer than n
// were added).
func (r *recentIDs) add(id string, n int) (forgot string) {
	if len(r.ring) < n {
		r.ring = append(r.ring, id)
		return ""
	}
	forgot, r.ring[r.next] = r.ring[r.next], id
	r.next = (r.next + 1) % n
	return forgot
}
