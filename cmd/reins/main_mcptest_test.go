package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestNewMCPCommand mounts the mcp command on a stand-in root and checks
// that "mcp tools" publishes the root's commands and omits its own
// subtree. (The real root is the lead's; this file is throwaway.)
func TestNewMCPCommand(t *testing.T) {
	root := &cobra.Command{Use: "reins"}
	agents := &cobra.Command{Use: "agents", Short: "Manage agents"}
	agents.AddCommand(&cobra.Command{Use: "list", Short: "List agents", Run: func(*cobra.Command, []string) {}})
	root.AddCommand(agents, newMCPCommand(root))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"mcp", "tools"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var defs []struct{ Name string }
	if err := json.Unmarshal(out.Bytes(), &defs); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(defs) != 1 || defs[0].Name != "reins_agents_list" {
		t.Errorf("catalogue = %+v", defs)
	}
	if strings.Contains(out.String(), "reins_mcp") {
		t.Error("mcp subtree published")
	}
}
