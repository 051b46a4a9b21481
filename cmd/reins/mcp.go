package main

import (
	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/mcp"
	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
)

// newMCPCommand returns the "mcp" command, which exposes root's CLI to MCP
// clients through the Cobra binding: "reins mcp serve" serves stdio,
// "reins mcp serve --http ADDR" serves streamable HTTP at /mcp, and
// "reins mcp tools" prints the catalogue as JSON. The mcp subtree itself
// is never published.
func newMCPCommand(root *cobra.Command) *cobra.Command {
	return mcpcobra.NewCommand(root, mcpcobra.CommandOptions{
		Server: mcp.Options{Name: "reins"},
	})
}
