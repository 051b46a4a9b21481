package sessions

import (
	"path"
	"strings"
	"testing"
)

func TestMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/workspace/a.txt":         "a.txt",
		"docs/a.txt":               "docs/a.txt",
		"/workspace/x/../y":        "y",
		"./z":                      "z",
		"/etc/passwd":              "",
		"/workspace":               "",
		"/workspace/../etc":        "",
		"../etc":                   "",
		"/workspace2/a":            "",
		"/workspace/.reins/x":      "",
		"/mnt/session/uploads/f_1": "",
	} {
		got, err := MountPath(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("MountPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzMountPath: an accepted mount path is a clean relative path that
// stays inside the workspace.
func FuzzMountPath(f *testing.F) {
	for _, s := range []string{"/workspace/a", "a/../../b", "/workspace/./../x", "..", "a\x00b", "/workspace//a//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rel, err := MountPath(in)
		if err != nil {
			return
		}
		if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") || strings.ContainsRune(rel, 0) {
			t.Fatalf("MountPath(%q) = %q escapes or is not clean", in, rel)
		}
	})
}
