// Command reins is the reins server and its command-line client: serve the
// Managed Agents API, manage keys, agents, environments and sessions, run
// executors and MCP servers.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := newRootCommand()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "reins:", err)
		os.Exit(exitCode(err))
	}
}
