// Command reins is the reins server and its command-line client: serve the
// Managed Agents API, manage keys, agents, environments and sessions, run
// executors and MCP servers. The command lives in package
// [github.com/reinsdev/reins/internal/cli].
package main

import "github.com/reinsdev/reins/internal/cli"

func main() {
	cli.Main()
}
