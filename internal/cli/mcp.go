package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/mcp"
	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
)

// mcpTool is how `reins mcp serve` publishes a command.
type mcpTool struct {
	readOnly    bool
	destructive bool
}

// mcpTools are the commands `reins mcp serve` publishes to an agent, by
// their path below the root. The list is closed: a command not named here
// is not published. Left out on purpose: serve and executor (they run a
// server or a machine's hands, and never return), keys create and revoke
// (they mint and cut credentials), environments keys, every vault command
// that writes (vaults credentials create handles secrets), sessions tail
// (it never returns), the mcp subtree, and an operator's commands on the
// data dir (backup, restore, master-key).
func mcpTools() map[string]mcpTool {
	read, write, destroy := mcpTool{readOnly: true}, mcpTool{}, mcpTool{destructive: true}
	return map[string]mcpTool{
		"version":                 read,
		"keys list":               read,
		"agents list":             read,
		"agents get":              read,
		"agents versions":         read,
		"agents create":           write,
		"agents update":           write,
		"agents archive":          destroy,
		"environments list":       read,
		"environments get":        read,
		"environments work":       read,
		"environments create":     write,
		"environments update":     write,
		"environments archive":    destroy,
		"environments delete":     destroy,
		"sessions list":           read,
		"sessions get":            read,
		"sessions events":         read,
		"sessions create":         write,
		"sessions send":           write,
		"sessions run":            write,
		"sessions archive":        destroy,
		"sessions delete":         destroy,
		"vaults list":             read,
		"vaults get":              read,
		"vaults credentials list": read,
	}
}

// mcpWithheldFlags are the flags `reins mcp serve` never publishes, on
// any command. Where the CLI reaches and as whom is fixed when the server
// starts (its environment: REINS_URL, REINS_API_KEY, REINS_DATA_DIR, or
// the key file in the default data dir), never chosen by a caller, who
// could otherwise send the key to a server of its own or read another
// data dir's key; and no caller reads this machine's files. The audit of
// every flag the published commands take:
//
//   - url, api-key, data-dir (agents, environments, sessions, vaults):
//     connection and credential;
//   - data-dir, database-url (keys): the store the keys are read from;
//   - file (agents/environments create and update, sessions create and
//     send): reads a path on this machine; the other flags set the same
//     fields.
//
// The other flags (output, paging, filters, the fields of a request)
// choose what a command does at the fixed server.
var mcpWithheldFlags = []string{"url", "api-key", "data-dir", "database-url", "file"}

// newMCPCommand returns the "mcp" command, which exposes root's CLI to MCP
// clients through the Cobra binding: "reins mcp serve" serves stdio,
// "reins mcp serve --http ADDR" serves streamable HTTP at /mcp behind a
// bearer token, and "reins mcp tools" prints the catalogue as JSON. Only
// the commands of mcpTools are published, with their MCP hints and
// without mcpWithheldFlags; read-only ones run in parallel, the others one
// at a time.
func newMCPCommand(root *cobra.Command) *cobra.Command {
	tools := mcpTools()
	return mcpcobra.NewCommand(root, mcpcobra.CommandOptions{
		Server: mcp.Options{Name: "reins"},
		Binding: mcpcobra.Options{
			Expose: func(cmd *cobra.Command) bool {
				t, ok := tools[commandPath(cmd)]
				if ok {
					annotate(cmd, t)
				}
				return ok
			},
			OmitFlags: mcpWithheldFlags,
		},
	})
}

// commandPath is cmd's path below the root ("sessions list").
func commandPath(cmd *cobra.Command) string {
	_, path, _ := strings.Cut(cmd.CommandPath(), " ")
	return path
}

// annotate records t as the MCP hints the binding reads.
func annotate(cmd *cobra.Command, t mcpTool) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[mcpcobra.ReadOnlyHint] = boolString(t.readOnly)
	cmd.Annotations[mcpcobra.DestructiveHint] = boolString(!t.readOnly && t.destructive)
	cmd.Annotations[mcpcobra.IdempotentHint] = boolString(t.readOnly)
	// Every call reaches the reins server, not the open world.
	cmd.Annotations[mcpcobra.OpenWorldHint] = "false"
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
