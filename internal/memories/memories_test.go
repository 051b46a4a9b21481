package memories

import "testing"

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{"/a", "/notes/todo.md", "/é.md", "/a b/c", "/" + string(make([]byte, 0)) + "x"} {
		if err := CheckPath(ok); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", ok, err)
		}
	}
	deep := ""
	for range 21 {
		deep += "/d"
	}
	for _, bad := range []string{"", "a", "/", "/a/", "//a", "/a//b", "/./a", "/a/..", "/a\x00", "/a\nb", "/a\u200bb", "/a\u2028", "/e\u0301.md", deep, "/" + string(make([]byte, 1024))} {
		if err := CheckPath(bad); err == nil {
			t.Errorf("CheckPath(%q) = nil, want an error", bad)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, ok := range []string{"/", "/notes/", "/a/b/"} {
		if err := CheckPrefix(ok); err != nil {
			t.Errorf("CheckPrefix(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/notes", "notes/", "//", "/a//"} {
		if err := CheckPrefix(bad); err == nil {
			t.Errorf("CheckPrefix(%q) = nil, want an error", bad)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Demo Memory": "demo-memory", "user_preferences": "user-preferences", "  X--Y  ": "x-y",
		"Ünïcode 2": "n-code-2", "!!!": "memory",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}
