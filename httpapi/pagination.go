package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cursor is the opaque page token: a position, the list order it belongs
// to, and its direction.
type cursor struct {
	Pos   int64  `json:"p"`
	Order string `json:"o"`
	Prev  bool   `json:"b,omitempty"`
}

func (c cursor) encode() *string {
	b, _ := json.Marshal(c)
	s := "page_" + base64.RawURLEncoding.EncodeToString(b)
	return &s
}

func decodeCursor(s, order string) (cursor, error) {
	var c cursor
	raw, ok := strings.CutPrefix(s, "page_")
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if !ok || err != nil || json.Unmarshal(b, &c) != nil || c.Pos <= 0 {
		return c, badRequest("page: invalid page cursor")
	}
	if c.Order != order {
		return c, badRequest("page: this cursor belongs to order=%s, not order=%s", c.Order, order)
	}
	return c, nil
}

// query wraps URL query access with the SDKs' conventions: bracketed
// arrays, repeated keys and comma lists.
type query struct{ r *http.Request }

func (q query) str(key string) string { return q.r.URL.Query().Get(key) }

func (q query) list(key string) []string {
	v := q.r.URL.Query()
	var out []string
	for _, k := range []string{key + "[]", key} {
		for _, s := range v[k] {
			for _, part := range strings.Split(s, ",") {
				if part = strings.TrimSpace(part); part != "" {
					out = append(out, part)
				}
			}
		}
	}
	return out
}

func (q query) limit(def, max int) (int, error) {
	s := q.str("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, badRequest("limit: must be an integer from 1 to %d, got %q", max, s)
	}
	return n, nil
}

func (q query) boolean(key string) (bool, error) {
	s := q.str(key)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("%s: must be true or false, got %q", key, s)
	}
	return b, nil
}

func (q query) order(def string) (string, error) {
	s := q.str("order")
	if s == "" {
		return def, nil
	}
	if s != "asc" && s != "desc" {
		return "", badRequest("order: must be asc or desc, got %q", s)
	}
	return s, nil
}

func (q query) time(key string) (*time.Time, error) {
	s := q.str(key)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, badRequest("%s: must be an RFC 3339 timestamp, got %q", key, s)
	}
	return &t, nil
}

func (q query) int64(key string) (int64, error) {
	s := q.str(key)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, badRequest("%s: must be a positive integer, got %q", key, s)
	}
	return n, nil
}
