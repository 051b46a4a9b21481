package connector

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxToolName is the longest tool name the model API accepts.
const maxToolName = 128

// sanitize maps s onto [A-Za-z0-9_-].
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func shortHash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
}

// toolKey identifies a tool of a server.
type toolKey struct{ server, tool string }

// modelNames gives every (server, tool) a distinct model-facing name
// matching [A-Za-z0-9_-]{1,128}: mcp__<server>__<tool>, sanitized; a name
// that had to be shortened or that collides with another gets a suffix
// derived from the original server and tool names, so names do not depend
// on listing order.
func modelNames(keys []toolKey) map[toolKey]string {
	base := make(map[toolKey]string, len(keys))
	count := map[string]int{}
	for _, k := range keys {
		n := sanitize("mcp__" + k.server + "__" + k.tool)
		base[k] = n
		count[n]++
	}
	out := make(map[toolKey]string, len(keys))
	used := map[string]bool{}
	for _, k := range keys {
		n := base[k]
		if count[n] > 1 || len(n) > maxToolName || n != "mcp__"+k.server+"__"+k.tool {
			n = withSuffix(n, shortHash(k.server, k.tool))
		}
		for i := 2; used[n]; i++ {
			n = withSuffix(base[k], shortHash(k.server, k.tool, strconv.Itoa(i)))
		}
		used[n] = true
		out[k] = n
	}
	return out
}

func withSuffix(n, suffix string) string {
	if len(n)+1+len(suffix) > maxToolName {
		n = n[:maxToolName-1-len(suffix)]
	}
	return n + "_" + suffix
}
