// Package packages installs the packages of a cloud environment
// (config.packages) into a layer: a host directory, installed once per
// environment version by the package managers themselves running in a
// sandbox, and bound read-only into the sandboxes of the environment's
// sessions at [sandbox.PackagesDir].
//
// Sandboxes see the host's /usr read-only, so reins installs with the
// host's own toolchains (python3 -m pip, npm, go, cargo, gem) into
// directories of the layer, never into the system: a manager is usable
// only when its toolchain is on the host, and apt never is.
package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox"
)

// Bounds of config.packages.
const (
	maxSpecs   = 256 // per manager
	maxSpecLen = 256 // bytes per package spec
)

// manager is one package manager: how to install with it into the
// layer and what the layer then adds to a sandbox's environment. Every
// path here is as seen inside a sandbox.
type manager struct {
	// name is the manager's key in config.packages.
	name string
	// specs picks the manager's list out of config.packages.
	specs func(p *ma.Packages) []string
	// programs must all be found in the sandbox's PATH (or at the
	// absolute paths given) for the manager to be usable.
	programs []string
	// unsupported, if set, is why reins never installs with it.
	unsupported string
	// argv is the install command for specs into dir, the manager's
	// directory in the staging layer.
	argv func(i *Installer, dir string, specs []string) []string
	// env is the install command's extra environment.
	env func(i *Installer, dir string) []string
	// layerEnv is what a sandbox needs to use what was installed in dir,
	// the manager's directory in the mounted layer; bin is added to PATH.
	layerEnv func(dir string) []string
	bin      string
}

// managers lists every key of config.packages, in the order installs run.
func managers() []manager {
	return []manager{
		{name: "apt", specs: func(p *ma.Packages) []string { return p.Apt },
			unsupported: "sandboxes share the host's read-only /usr; install them on the host"},
		{name: "pip", specs: func(p *ma.Packages) []string { return p.Pip }, programs: []string{"python3", "pip3"},
			argv: pipArgv, layerEnv: func(dir string) []string { return []string{"PYTHONPATH=" + dir} }, bin: "bin"},
		{name: "npm", specs: func(p *ma.Packages) []string { return p.Npm }, programs: []string{"node", "npm"},
			argv: npmArgv, layerEnv: func(dir string) []string { return []string{"NODE_PATH=" + dir + "/node_modules"} },
			bin: "node_modules/.bin"},
		{name: "go", specs: func(p *ma.Packages) []string { return p.Go }, programs: []string{"/usr/local/go/bin/go"},
			argv: goArgv, env: goEnv, bin: "bin"},
		{name: "cargo", specs: func(p *ma.Packages) []string { return p.Cargo }, programs: []string{"cargo"},
			argv: cargoArgv, env: func(*Installer, string) []string { return []string{"CARGO_HOME=/tmp/cargo"} }, bin: "bin"},
		{name: "gem", specs: func(p *ma.Packages) []string { return p.Gem }, programs: []string{"ruby", "gem"},
			argv: gemArgv, layerEnv: func(dir string) []string { return []string{"GEM_PATH=" + dir} }, bin: "bin"},
	}
}

// Validate reports the first part of p that reins cannot install on this
// host, or a package spec that is not a plain name and version: its
// message suits a 400 invalid_request_error.
func Validate(p *ma.Packages) error {
	if p == nil {
		return nil
	}
	for _, m := range managers() {
		specs := m.specs(p)
		if len(specs) == 0 {
			continue
		}
		if err := m.usable(); err != nil {
			return err
		}
		if len(specs) > maxSpecs {
			return fmt.Errorf("packages.%s: at most %d packages; got %d", m.name, maxSpecs, len(specs))
		}
		for i, s := range specs {
			if err := checkSpec(s); err != nil {
				return fmt.Errorf("packages.%s[%d]: %w", m.name, i, err)
			}
		}
	}
	return nil
}

// usable reports why reins cannot install with m on this host.
func (m manager) usable() error {
	if m.unsupported != "" {
		return fmt.Errorf("packages.%s: reins cannot install %s packages: %s", m.name, m.name, m.unsupported)
	}
	for _, prog := range m.programs {
		if _, err := lookInSandbox(prog); err != nil {
			return fmt.Errorf("packages.%s: reins cannot install %s packages: %w; install the toolchain on the host (sandboxes run the host's /usr)", m.name, m.name, err)
		}
	}
	return nil
}

// lookInSandbox finds prog where a sandbox would: in [sandbox.Path],
// which lies under the host's /usr and /bin that sandboxes see.
func lookInSandbox(prog string) (string, error) {
	if filepath.IsAbs(prog) {
		if !underUsr(prog) {
			return "", fmt.Errorf("%s is not under /usr", prog)
		}
		return exec.LookPath(prog)
	}
	for _, dir := range filepath.SplitList(sandbox.Path) {
		if p, err := exec.LookPath(filepath.Join(dir, prog)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not in %s on the host", prog, sandbox.Path)
}

func underUsr(p string) bool { return strings.HasPrefix(filepath.Clean(p), "/usr/") }

// checkSpec accepts a package name with an optional version in its
// manager's syntax (requests==2.31, requests[socks]>=2,<3, @scope/pkg@^1,
// golang.org/x/tools/cmd/stringer@v0.1.0, rake:13.0): nothing that could
// be taken as an option, split into arguments or read by a shell.
// Install commands never go through a shell and put "--" before the
// specs where the manager understands it; this is the second guard.
func checkSpec(s string) error {
	if s == "" || len(s) > maxSpecLen {
		return fmt.Errorf("a package spec has 1 to %d characters; got %d", maxSpecLen, len(s))
	}
	if s[0] == '-' || s[0] == '.' || s[0] == '/' {
		return fmt.Errorf("%q: a package spec starts with a letter, a digit or @", s)
	}
	for _, r := range s {
		if !specRune(r) {
			return fmt.Errorf("%q: %q is not allowed in a package spec (letters, digits and . _ - + @ / : = < > ! ~ ^ , * [ ] only)", s, r)
		}
	}
	if strings.Contains(s, "..") || strings.Contains(s, "://") {
		return fmt.Errorf("%q: a package spec is a name and a version, not a path or URL", s)
	}
	return nil
}

func specRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("._-+@/:=<>!~^,*[]", r)
}

// Key names the layer of an environment's packages: the environment's id
// and a hash of its packages, so that each version of the environment has
// its own layer.
func Key(environmentID string, p *ma.Packages) string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return environmentID + "-" + hex.EncodeToString(sum[:8])
}

// Empty reports whether p lists no package at all.
func Empty(p *ma.Packages) bool {
	if p == nil {
		return true
	}
	for _, m := range managers() {
		if len(m.specs(p)) > 0 {
			return false
		}
	}
	return true
}
