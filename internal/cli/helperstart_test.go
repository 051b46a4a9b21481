package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSandboxHelperSkipsHeavyPackages: a sandbox's init and the launcher
// of each process in it are this binary re-executed, once per sandbox
// and once per process. They must exit before the packages that make the
// server's start slow are initialized (the JSON Schema compiler alone
// takes 13 ms here), so the sandbox package runs them from its package
// initializer, which comes before those packages.
func TestSandboxHelperSkipsHeavyPackages(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A launcher told to run nothing: it fails at once, after its
	// package initializers have run.
	cmd := exec.Command(exe, "{}")
	cmd.Args[0] = "reins-sandbox-exec"
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 127 || !strings.Contains(stderr.String(), "no program to run") {
		t.Fatalf("the launcher: %v, %s", err, stderr.String())
	}
	inited := map[string]bool{}
	for line := range strings.Lines(stderr.String()) {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			inited[f[1]] = true
		}
	}
	// The sandbox package's own initializer never returns, so it is not
	// traced; the packages before it are.
	if !inited["golang.org/x/sys/unix"] {
		t.Fatalf("no init trace of the packages the launcher needs in:\n%s", stderr.String())
	}
	for _, heavy := range []string{
		"github.com/santhosh-tekuri/jsonschema/v6",
		"github.com/openai/openai-go/v3",
		"github.com/reinsdev/reins/internal/httpapi",
		"github.com/reinsdev/reins/executor",
		"main",
	} {
		if inited[heavy] {
			t.Errorf("the launcher initialized %s before it ran", heavy)
		}
	}
}
