package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "reins",
		Short:         "A self-hosted managed-agents platform",
		Long:          "reins serves the Claude Managed Agents API on a durable event log, runs agent sessions, and connects the machines that run their tools.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("reins {{.Version}}\n")
	root.AddCommand(newServeCommand(), newKeysCommand(), newWorkspacesCommand(), newAgentsCommand(), newEnvironmentsCommand(), newSessionsCommand(), newVaultsCommand(), newWebhooksCommand(), newMemoryCommand(), newExecutorCommand(), newVersionCommand())
	root.AddCommand(newChatCommand())
	root.AddCommand(newBackupCommand(), newRestoreCommand(), newMasterKeyCommand())
	root.AddCommand(newDreamsCommand())
	root.AddCommand(newDeploymentsCommand())
	root.AddCommand(newMCPCommand(root))
	requireSubcommands(root)
	return root
}

// requireSubcommands makes every command that only groups others refuse
// an unknown subcommand (cobra prints the group's help and exits 0), and
// print its help when called alone.
func requireSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		requireSubcommands(c)
	}
	if cmd.HasParent() && cmd.HasSubCommands() && !cmd.Runnable() {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; run '%s --help'", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
}

// envOr returns the environment variable's value, or def.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// defaultDataDir is $XDG_DATA_HOME/reins, else ~/.local/share/reins.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "reins")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "reins")
	}
	return "reins-data"
}
