package cobra

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzArgv: whatever flag values and positionals a caller sends, the
// child's command line is the path, then only --name=value for published
// flags, then "--", then the positionals verbatim; or the input is refused.
func FuzzArgv(f *testing.F) {
	for _, s := range [][2]string{
		{`{"tags":["a","b"],"times":3}`, `["--config=x","-v"]`},
		{`{"label":{"k":"v"},"upper":true}`, `["--","x"]`},
		{`{"wait":"1s","ratio":0.5}`, `[]`},
		{`{"tags":["a,b"]}`, `["a"]`},
		{`{"times":1.5}`, `["\u0000"]`},
	} {
		f.Add(s[0], s[1])
	}
	kinds := builtinKinds()
	flags := map[string]boundFlag{}
	for name, typ := range map[string]string{"tags": "stringSlice", "times": "int8", "label": "stringToString",
		"upper": "bool", "wait": "duration", "ratio": "float64", "name": "string"} {
		flags[name] = boundFlag{name: name, encode: kinds[typ].encode}
	}
	path := []string{"echo"}
	f.Fuzz(func(t *testing.T, flagJSON, argsJSON string) {
		var in input
		if json.Unmarshal([]byte(flagJSON), &in.Flags) != nil || json.Unmarshal([]byte(argsJSON), &in.Args) != nil {
			return
		}
		out, err := argv(path, flags, in)
		if err != nil {
			return
		}
		sep := slices.Index(out, "--")
		if sep < len(path) || !slices.Equal(out[:len(path)], path) {
			t.Fatalf("malformed command line %q", out)
		}
		for _, a := range out[len(path):sep] {
			name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !ok || flags[name].name == "" {
				t.Fatalf("flag element %q in %q", a, out)
			}
		}
		if !slices.Equal(out[sep+1:], in.Args) && !(len(in.Args) == 0 && len(out) == sep+1) {
			t.Fatalf("positionals %q, want %q", out[sep+1:], in.Args)
		}
	})
}
