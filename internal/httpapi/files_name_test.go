package httpapi

import "testing"

func TestFileName(t *testing.T) {
	for _, c := range []struct{ name, mime, want string }{
		{"dir/sub/a.txt", "text/plain", "a.txt"},
		{`C:\Users\x\b.pdf`, "application/pdf", "b.pdf"},
		{"", "application/pdf", "unnamed.pdf"},
		{"/", "", "unnamed"},
	} {
		if got := fileName(c.name, c.mime); got != c.want {
			t.Errorf("fileName(%q, %q) = %q, want %q", c.name, c.mime, got, c.want)
		}
	}
}
