package packages

import (
	"os/exec"
	"strings"
	"testing"

	ma "github.com/reinsdev/reins/managedagents"
)

func TestValidate(t *testing.T) {
	good := &ma.Packages{Pip: []string{"requests==2.31.0", "requests[socks]>=2,<3", "rich~=13.0", "numpy!=1.0,>=1.2"},
		Npm: []string{"left-pad", "@types/node@^20.1.0", "lodash@4.x", "react@>=18"}}
	if err := Validate(good); err != nil {
		t.Errorf("good specs: %v", err)
	}
	if err := Validate(&ma.Packages{Type: "packages", Apt: []string{}}); err != nil {
		t.Errorf("empty lists: %v", err)
	}
	for _, tc := range []struct {
		p    *ma.Packages
		want string
	}{
		{&ma.Packages{Apt: []string{"curl"}}, "packages.apt: reins cannot install apt packages: sandboxes share the host's read-only /usr"},
		{&ma.Packages{Pip: []string{"-e"}}, "packages.pip[0]"},
		{&ma.Packages{Pip: []string{"ok", "--index-url=http://evil"}}, "packages.pip[1]"},
		{&ma.Packages{Pip: []string{"a b"}}, "' ' is not allowed"},
		{&ma.Packages{Npm: []string{"a;rm -rf /"}}, "';' is not allowed"},
		{&ma.Packages{Npm: []string{"$(id)"}}, "packages.npm[0]"},
		{&ma.Packages{Npm: []string{"a`id`"}}, "'`' is not allowed"},
		{&ma.Packages{Npm: []string{"x|y"}}, "'|' is not allowed"},
		{&ma.Packages{Npm: []string{"a\nb"}}, "not allowed"},
		{&ma.Packages{Npm: []string{""}}, "1 to 256 characters"},
		{&ma.Packages{Npm: []string{strings.Repeat("a", 257)}}, "1 to 256 characters"},
		{&ma.Packages{Npm: []string{"../../etc"}}, "packages.npm[0]"},
		{&ma.Packages{Pip: []string{"git+https://example.com/x.git"}}, "not a path or URL"},
		{&ma.Packages{Pip: make([]string, 257)}, "at most 256"},
	} {
		err := Validate(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// TestValidateToolchains: go, cargo and gem are accepted exactly when
// their toolchain is where a sandbox finds it.
func TestValidateToolchains(t *testing.T) {
	for _, tc := range []struct {
		p    *ma.Packages
		prog string
	}{
		{&ma.Packages{Go: []string{"golang.org/x/tools/cmd/stringer@v0.20.0"}}, "/usr/local/go/bin/go"},
		{&ma.Packages{Cargo: []string{"ripgrep@14.1.0"}}, "cargo"},
		{&ma.Packages{Gem: []string{"rake:13.0.0"}}, "gem"},
	} {
		_, missing := lookInSandbox(tc.prog)
		err := Validate(tc.p)
		if (err == nil) != (missing == nil) {
			t.Errorf("%+v: Validate says %v; the toolchain's lookup says %v", tc.p, err, missing)
		}
		if err != nil && !strings.Contains(err.Error(), "install the toolchain on the host") {
			t.Errorf("%+v: %v", tc.p, err)
		}
	}
	// A toolchain elsewhere (~/.cargo/bin) is invisible in sandboxes.
	if p, err := exec.LookPath("cargo"); err == nil && !underUsr(p) {
		if _, err := lookInSandbox("cargo"); err == nil {
			t.Skip("this host has a cargo under /usr too")
		}
		if err := Validate(&ma.Packages{Cargo: []string{"ripgrep"}}); err == nil {
			t.Errorf("cargo at %s was accepted", p)
		}
	}
}

func TestKey(t *testing.T) {
	a := &ma.Packages{Pip: []string{"requests"}}
	b := &ma.Packages{Pip: []string{"requests==2.0"}}
	if Key("env_1", a) != Key("env_1", &ma.Packages{Pip: []string{"requests"}}) {
		t.Error("the key of the same packages changed")
	}
	if Key("env_1", a) == Key("env_1", b) || Key("env_1", a) == Key("env_2", a) {
		t.Error("different packages or environments share a key")
	}
	if !strings.HasPrefix(Key("env_1", a), "env_1-") || checkKey(Key("env_1", a)) != nil {
		t.Errorf("key %q", Key("env_1", a))
	}
}
