package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "reins", version())
		},
	}
}

// stampedVersion is the version a release build stamps in at link time
// (make release: -ldflags "-X github.com/reinsdev/reins/internal/cli.stampedVersion=…");
// empty in other builds. It is the one package-level variable here because
// the linker can set only a variable.
var stampedVersion string

// version is the binary's version: the one a release build stamped in,
// else from its build information: the module
// version when built from a tagged module (go install …@v1.2.3), else the
// VCS revision, its time and whether the tree was modified (a build in a
// checkout), else "(devel)".
func version() string {
	if stampedVersion != "" {
		return stampedVersion
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "(devel)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "(devel) " + rev
	if at != "" {
		v += " " + at
	}
	if modified == "true" {
		v += " modified"
	}
	return v
}
