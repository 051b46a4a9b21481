package managedagents

import "testing"

func TestCheckMemoryPath(t *testing.T) {
	for _, ok := range []string{"/a", "/notes/todo.md", "/é.md", "/a b/c", "/" + string(make([]byte, 0)) + "x"} {
		if err := CheckMemoryPath(ok); err != nil {
			t.Errorf("CheckMemoryPath(%q) = %v, want nil", ok, err)
		}
	}
	deep := ""
	for range 21 {
		deep += "/d"
	}
	for _, bad := range []string{"", "a", "/", "/a/", "//a", "/a//b", "/./a", "/a/..", "/a\x00", "/a\nb", "/a\u200bb", "/a\u2028", "/e\u0301.md", deep, "/" + string(make([]byte, 1024))} {
		if err := CheckMemoryPath(bad); err == nil {
			t.Errorf("CheckMemoryPath(%q) = nil, want an error", bad)
		}
	}
}
