// Package cli is the reins command: the server (`reins serve`) and its
// command-line client (keys, agents, environments, sessions, executors, MCP
// servers). cmd/reins only calls [Run].
package cli

import (
	"fmt"
	"io"
	"os"
)

// Run runs the reins command with args (without the program name), writing
// its failure to stderr, and returns the process's exit code.
func Run(args []string, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "reins:", err)
		return exitCode(err)
	}
	return 0
}

// Main is the reins command's main function.
func Main() {
	os.Exit(Run(os.Args[1:], os.Stderr))
}
