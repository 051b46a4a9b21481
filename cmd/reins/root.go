package main

import (
	"errors"
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
	root.AddCommand(newServeCommand(), newKeysCommand(), newAgentsCommand(), newEnvironmentsCommand(), newSessionsCommand(), newVaultsCommand(), newExecutorCommand(), newVersionCommand())
	root.AddCommand(newChatCommand())
	root.AddCommand(newMCPCommand(root))
	return root
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
