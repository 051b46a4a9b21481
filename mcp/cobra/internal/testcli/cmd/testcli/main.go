// Command testcli is the test CLI of the MCP Cobra binding, with its "mcp"
// command. Environment variables tune the binding for tests:
// TESTCLI_TIMEOUT, TESTCLI_GRACE and TESTCLI_CLEANUP (Go durations) and
// TESTCLI_OUTPUT_CAP (bytes).
package main

import (
	"os"
	"strconv"
	"time"

	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
	"github.com/reinsdev/reins/mcp/cobra/internal/testcli"
)

func main() {
	root := testcli.Root()
	dur := func(k string) time.Duration { d, _ := time.ParseDuration(os.Getenv(k)); return d }
	capBytes, _ := strconv.Atoi(os.Getenv("TESTCLI_OUTPUT_CAP"))
	root.AddCommand(mcpcobra.NewCommand(root, mcpcobra.CommandOptions{Binding: mcpcobra.Options{
		Timeout: dur("TESTCLI_TIMEOUT"), TermGrace: dur("TESTCLI_GRACE"),
		CleanupBudget: dur("TESTCLI_CLEANUP"), OutputCap: capBytes,
	}}))
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
