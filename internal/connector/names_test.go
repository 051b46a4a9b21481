package connector

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func TestModelNames(t *testing.T) {
	long := strings.Repeat("x", 200)
	keys := []toolKey{
		{"github", "search_issues"},
		{"git.hub", "search"}, // sanitizes to git_hub
		{"git_hub", "search"},
		{"a", "b__c"},
		{"a__b", "c"}, // mcp__a__b__c twice before suffixes
		{"srv", "résumé tool"},
		{"srv", long},
		{long, "t"},
	}
	names := modelNames(keys)
	seen := map[string]toolKey{}
	for _, k := range keys {
		n := names[k]
		if !validName.MatchString(n) {
			t.Errorf("%v: invalid name %q", k, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%v and %v share the name %q", prev, k, n)
		}
		seen[n] = k
	}
	if names[toolKey{"github", "search_issues"}] != "mcp__github__search_issues" {
		t.Errorf("a plain name was changed: %q", names[toolKey{"github", "search_issues"}])
	}
	// Names do not depend on order.
	rev := make([]toolKey, len(keys))
	for i, k := range keys {
		rev[len(keys)-1-i] = k
	}
	for k, n := range modelNames(rev) {
		if names[k] != n {
			t.Errorf("%v: %q in one order, %q in the other", k, names[k], n)
		}
	}
}
