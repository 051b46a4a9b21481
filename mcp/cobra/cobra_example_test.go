package cobra_test

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/mcp"
	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
)

// New turns the runnable commands of a tree into operations; pure groups,
// hidden commands and the mcp command itself are left out.
func ExampleNew() {
	root := &cobra.Command{Use: "tool"}
	config := &cobra.Command{Use: "config", Short: "Configuration"}
	get := &cobra.Command{Use: "get KEY", Short: "Print a setting",
		Annotations: map[string]string{"readOnlyHint": "true"}, Run: func(*cobra.Command, []string) {}}
	get.Flags().String("format", "text", "output format")
	config.AddCommand(get)
	root.AddCommand(config, &cobra.Command{Use: "debug", Hidden: true, Run: func(*cobra.Command, []string) {}})
	root.AddCommand(mcpcobra.NewCommand(root, mcpcobra.CommandOptions{}))

	b, err := mcpcobra.New(root, mcpcobra.Options{Executable: "/usr/local/bin/tool"})
	if err != nil {
		panic(err)
	}
	for _, op := range b.Operations() {
		fmt.Println(op.Name, op.Group, op.Annotations.ReadOnly)
	}
	srv := mcp.NewServer(mcp.Options{Mode: mcp.Direct})
	fmt.Println(srv.Add(b.Operations()...))
	// Output:
	// tool_config_get config true
	// <nil>
}
