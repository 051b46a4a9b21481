package executorhub

// maxKept bounds what the hub remembers per lease and per hub for
// deduplication (tool results, expired leases). The Go client remembers
// as many tool_call_ids per session.
const maxKept = 4096

// recent is a map that keeps only the last maxKept keys put in it, so
// that what the hub remembers to recognize a late or repeated message
// does not grow without bound. Its zero value is empty and ready.
type recent[V any] struct {
	m    map[string]V
	keys []string // in the order they were first put, the oldest first
}

// get returns the value of k.
func (r *recent[V]) get(k string) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}

// put sets k to v. A new key beyond maxKept pushes out the oldest.
func (r *recent[V]) put(k string, v V) {
	if r.m == nil {
		r.m = make(map[string]V)
	}
	if _, ok := r.m[k]; !ok {
		if len(r.keys) == maxKept {
			delete(r.m, r.keys[0])
			r.keys = r.keys[1:]
		}
		r.keys = append(r.keys, k)
	}
	r.m[k] = v
}
