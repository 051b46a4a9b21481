package tools

import (
	"encoding/json"
	"errors"
	"testing"
)

func FuzzDecodeInput(f *testing.F) {
	for _, s := range []struct{ name, in string }{
		{"bash", `{"command":"ls","timeout_ms":100}`},
		{"bash", `{"restart":true}`},
		{"read", `{"file_path":"a","view_range":[1,-1]}`},
		{"write", `{"file_path":"a","content":""}`},
		{"edit", `{"file_path":"a","old_string":"x","new_string":"y","replace_all":true}`},
		{"glob", `{"pattern":"**/*.go","path":"src"}`},
		{"grep", `{"pattern":"a+"}`},
		{"read", `{"file_path":"a","view_range":[3]}`},
		{"nope", `{}`},
	} {
		f.Add(s.name, []byte(s.in))
	}
	f.Fuzz(func(t *testing.T, name string, raw []byte) {
		in, err := DecodeInput(name, raw)
		if err != nil {
			var te *Error
			if !errors.As(err, &te) || (te.Code != CodeInvalidInput && te.Code != CodeUnknownTool) {
				t.Fatalf("error %v is not an invalid_input *Error", err)
			}
			return
		}
		if _, err := json.Marshal(in); err != nil {
			t.Fatal(err)
		}
		if r, ok := in.(*ReadInput); ok && r.ViewRange != nil && (len(r.ViewRange) != 2 || r.ViewRange[0] < 1) {
			t.Fatalf("bad range accepted: %v", r.ViewRange)
		}
	})
}

func FuzzWorkspacePaths(f *testing.F) {
	for _, p := range []string{"a", "../a", "/etc/passwd", "a/../../b", "./x/./y", "", ".", "a/\x00"} {
		f.Add(p)
	}
	w, err := OpenWorkspace(f.TempDir(), WorkspaceOptions{NoSandbox: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { w.Close() })
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := w.rel(p)
		if err == nil && rel != "." && (len(rel) == 0 || rel[0] == '/' || rel == ".." || len(rel) >= 3 && rel[:3] == "../") {
			t.Fatalf("rel(%q) = %q escapes", p, rel)
		}
	})
}
