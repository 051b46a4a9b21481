package memories

import "testing"

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
