// Package testcli is a small Cobra CLI that exercises the binding: flags
// of many types, failing, sleeping and forking commands, and commands the
// binding must leave out.
package testcli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	cc "github.com/spf13/cobra"
)

// Root returns the test CLI's command tree.
func Root() *cc.Command {
	root := &cc.Command{Use: "testcli", Short: "A CLI for testing the MCP binding", SilenceUsage: true}
	root.PersistentFlags().Bool("verbose", false, "talk more")

	echo := &cc.Command{
		Use: "echo [words...]", Short: "Print flags and arguments as JSON",
		Annotations: map[string]string{"readOnlyHint": "true", "idempotentHint": "true", "title": "Echo"},
		RunE: func(cmd *cc.Command, args []string) error {
			f := cmd.Flags()
			upper, _ := f.GetBool("upper")
			times, _ := f.GetInt8("times")
			tags, _ := f.GetStringSlice("tags")
			ratio, _ := f.GetFloat64("ratio")
			wait, _ := f.GetDuration("wait")
			labels, _ := f.GetStringToString("label")
			verbose, _ := f.GetBool("verbose")
			if upper {
				for i := range args {
					args[i] = strings.ToUpper(args[i])
				}
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"args": args, "upper": upper,
				"times": times, "tags": tags, "ratio": ratio, "wait": wait.String(), "label": labels, "verbose": verbose})
		},
	}
	echo.Flags().Bool("upper", false, "upper-case the words")
	echo.Flags().Int8("times", 1, "a small integer")
	echo.Flags().StringSlice("tags", nil, "tags")
	echo.Flags().Float64("ratio", 0, "a ratio")
	echo.Flags().Duration("wait", 0, "a duration")
	echo.Flags().StringToString("label", nil, "labels")
	echo.Flags().String("secret-token", "", "never published")
	_ = echo.Flags().MarkHidden("secret-token")

	fail := &cc.Command{
		Use: "fail", Short: "Exit with a status",
		RunE: func(cmd *cc.Command, _ []string) error {
			code, _ := cmd.Flags().GetInt("code")
			fmt.Fprintln(cmd.OutOrStdout(), "some output")
			fmt.Fprintln(cmd.ErrOrStderr(), "boom: failing on purpose")
			os.Exit(code)
			return nil
		},
	}
	fail.Flags().Int("code", 3, "exit status")

	sleep := &cc.Command{
		Use: "sleep", Short: "Sleep",
		RunE: func(cmd *cc.Command, _ []string) error {
			d, _ := cmd.Flags().GetDuration("for")
			if ign, _ := cmd.Flags().GetBool("ignore-term"); ign {
				signal.Ignore(syscall.SIGTERM)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "sleeping")
			time.Sleep(d)
			return nil
		},
	}
	sleep.Flags().Duration("for", time.Hour, "how long")
	sleep.Flags().Bool("ignore-term", false, "ignore SIGTERM")
	peek := &cc.Command{
		Use: "peek", Short: "Sleep, read-only",
		Annotations: map[string]string{"readOnlyHint": "true"},
		RunE: func(cmd *cc.Command, _ []string) error {
			d, _ := cmd.Flags().GetDuration("for")
			time.Sleep(d)
			fmt.Fprintln(cmd.OutOrStdout(), "peeked")
			return nil
		},
	}
	peek.Flags().Duration("for", time.Second, "how long")

	spawn := &cc.Command{
		Use: "spawn", Short: "Start a grandchild that ignores SIGTERM, print its PID, and exit",
		RunE: func(cmd *cc.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			c := exec.Command(exe, "linger")
			if err := c.Start(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.Process.Pid)
			if wait, _ := cmd.Flags().GetBool("wait"); wait {
				signal.Ignore(syscall.SIGTERM)
				return c.Wait()
			}
			return nil
		},
	}
	spawn.Flags().Bool("wait", false, "wait for the grandchild, ignoring SIGTERM")
	linger := &cc.Command{
		Use: "linger", Hidden: true,
		Run: func(*cc.Command, []string) {
			signal.Ignore(syscall.SIGTERM)
			time.Sleep(time.Hour)
		},
	}
	noisy := &cc.Command{
		Use: "noisy", Short: "Write many bytes",
		RunE: func(cmd *cc.Command, _ []string) error {
			n, _ := cmd.Flags().GetInt("bytes")
			_, err := io.WriteString(cmd.OutOrStdout(), strings.Repeat("n", n))
			return err
		},
	}
	noisy.Flags().Int("bytes", 1000, "how many")
	stdin := &cc.Command{
		Use: "stdin", Short: "Report what stdin holds",
		RunE: func(cmd *cc.Command, _ []string) error {
			b, err := io.ReadAll(os.Stdin)
			fmt.Fprintf(cmd.OutOrStdout(), "%d %v\n", len(b), err)
			return nil
		},
	}
	admin := &cc.Command{Use: "admin", Short: "Administration (a group)"}
	users := &cc.Command{Use: "users", Short: "List users",
		Run: func(cmd *cc.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "alice") }}
	admin.AddCommand(users)
	old := &cc.Command{Use: "old", Deprecated: "use echo", Run: func(*cc.Command, []string) {}}
	secret := &cc.Command{Use: "secret", Annotations: map[string]string{"mcp.reins.dev/omit": "true"},
		Run: func(*cc.Command, []string) {}}
	hidden := &cc.Command{Use: "hideme", Hidden: true, Run: func(*cc.Command, []string) {}}
	root.AddCommand(echo, fail, sleep, peek, spawn, linger, noisy, stdin, admin, old, secret, hidden)
	return root
}
