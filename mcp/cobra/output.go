package cobra

import (
	"fmt"
	"sync"
)

// capture retains at most limit bytes of a stream: the head and the tail,
// with a marker in between when the middle was dropped.
type capture struct {
	limit int

	mu      sync.Mutex // guards the fields below
	head    []byte
	tail    []byte // ring of the last bytes
	dropped int64
}

func newCapture(limit int) *capture { return &capture{limit: limit} }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	half := c.limit / 2
	if room := half - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	keep := c.limit - half
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - keep; over > 0 {
		c.dropped += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
	return n, nil
}

// String returns the retained text and whether anything was dropped.
func (c *capture) String() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped == 0 {
		return string(c.head) + string(c.tail), false
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", c.head, c.dropped, c.tail), true
}
