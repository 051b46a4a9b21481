package app

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps the checks of docs/architecture.md true: the public
// executor SDK links no internal package, the egress code knows no
// database, and the sessions writer does not reach up into the harness.
func TestLayering(t *testing.T) {
	const mod = "github.com/reinsdev/reins/"
	checks := []struct {
		pkgs      []string
		forbidden string // an import path prefix none of pkgs may depend on
		rule      string
	}{
		{[]string{mod + "executor/..."}, mod + "internal/", "the executor SDK imports nothing internal"},
		{[]string{mod + "internal/webfetch", mod + "sandbox/..."}, mod + "internal/store", "egress code knows no database"},
		{[]string{mod + "internal/sessions"}, mod + "internal/harness", "the sessions writer does not import the harness"},
	}
	for _, c := range checks {
		out, err := exec.Command("go", append([]string{"list", "-deps"}, c.pkgs...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", c.pkgs, err)
		}
		var bad []string
		for _, p := range strings.Fields(string(out)) {
			if strings.HasPrefix(p, c.forbidden) {
				bad = append(bad, p)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s, but %v depend on %v", c.rule, c.pkgs, bad)
		}
	}
}
