package mcp

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzCheckArguments: the argument decoder never panics, accepts only JSON
// objects, and rejects only with invalid_arguments.
func FuzzCheckArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":[1,2,{"b":"c"}]}`, `{"n":9007199254740993}`,
		`{"n":1e999}`, `[]`, `{"a":`, `null`, `{"a":1}{}`, `{"a":-0.5e-400}`} {
		f.Add([]byte(s))
	}
	lim := ArgumentLimits{MaxDepth: 8, MaxEntries: 16, MaxString: 64}.withDefaults()
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, _, err := checkArguments(raw, lim)
		if err != nil {
			var fl *Failure
			if !errors.As(err, &fl) || fl.Code() != CodeInvalidArguments {
				t.Fatalf("error %v is not invalid_arguments", err)
			}
			return
		}
		var m map[string]any
		if json.Unmarshal(out, &m) != nil || m == nil {
			t.Fatalf("accepted %q, which is not a JSON object", raw)
		}
	})
}

// FuzzParseToken: the continuation token parser never panics and never
// accepts a token it did not sign.
func FuzzParseToken(f *testing.F) {
	tk := newTokens(4)
	good := tk.sign(claims{Instance: tk.instance, Chain: "c", Op: "op", Caller: "u", Args: "a", Expires: 1})
	other := newTokens(4).sign(claims{Instance: "x", Chain: "c"})
	for _, s := range []string{good, other, "", ".", "a.b", good + "x", strings.ToUpper(good)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := tk.parse(s)
		if err == nil && s != good {
			t.Fatalf("accepted a token it did not sign: %q (%+v)", s, c)
		}
		if err != nil {
			var fl *Failure
			if !errors.As(err, &fl) || (fl.Code() != CodeContinuationInvalid && fl.Code() != CodeContinuationStale) {
				t.Fatalf("error %v has the wrong code", err)
			}
		}
	})
}

// FuzzFrameGuard: the stdio frame guard passes every frame within the
// limit through unchanged and answers each longer one with one error.
func FuzzFrameGuard(f *testing.F) {
	for _, s := range []string{"", "a\n", "short\nwaytoolongline\nok\n", "no newline", "\n\n\n", strings.Repeat("x", 100) + "\nend"} {
		f.Add(s)
	}
	const limit = 8
	f.Fuzz(func(t *testing.T, in string) {
		var replies strings.Builder
		g := newFrameGuard(io.NopCloser(strings.NewReader(in)), &replies, limit)
		got, err := io.ReadAll(g)
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		over := 0
		for line := range strings.SplitAfterSeq(in, "\n") {
			if len(strings.TrimSuffix(line, "\n")) > limit {
				over++
				continue
			}
			want.WriteString(line)
		}
		if string(got) != want.String() {
			t.Fatalf("passed %q, want %q", got, want.String())
		}
		if n := strings.Count(replies.String(), "\n"); n != over {
			t.Fatalf("%d replies for %d oversized frames", n, over)
		}
	})
}
