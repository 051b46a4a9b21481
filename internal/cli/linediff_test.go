package cli

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestUnifiedDiffGolden: the output of GNU diff -u (its headers aside)
// for a few cases, a last line without "\n" and empty sides included.
func TestUnifiedDiffGolden(t *testing.T) {
	letters := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	cases := []struct{ a, b, want string }{
		{letters, strings.Replace(letters, "b\n", "B\n", 1) + "n",
			"@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -11,3 +11,4 @@\n k\n l\n m\n+n\n\\ No newline at end of file\n"},
		{"", "x\ny\n", "@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"x\ny\n", "", "@@ -1,2 +0,0 @@\n-x\n-y\n"},
		{"x\ny\n", "x\ny", "@@ -1,2 +1,2 @@\n x\n-y\n+y\n\\ No newline at end of file\n"},
		{"same\n", "same\n", ""},
	}
	for i, c := range cases {
		got := unifiedDiff(c.a, c.b, "a", "b")
		want := ""
		if c.want != "" {
			want = "--- a\n+++ b\n" + c.want
		}
		if got != want {
			t.Errorf("case %d:\n got:\n%s\nwant:\n%s", i, got, want)
		}
	}
}

// TestUnifiedDiffApplies: on random texts, applying the diff of a and b
// to a gives b, every context and removed line matching a, and a diff is
// no longer than a plain "remove all, add all" (only the differing lines
// are listed as changes).
func TestUnifiedDiffApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(strconv.Itoa(r.IntN(6)))
			b.WriteByte('\n')
		}
		if r.IntN(4) == 0 {
			b.WriteString("tail")
		}
		return b.String()
	}
	for i := range 500 {
		a, b := text(), text()
		d := unifiedDiff(a, b, "a", "b")
		got, err := applyUnified(a, d)
		if err != nil || got != b {
			t.Fatalf("case %d: applying the diff: %v\na=%q\nb=%q\ndiff:\n%s\ngot %q", i, err, a, b, d, got)
		}
		if (a == b) != (d == "") {
			t.Fatalf("case %d: equal %v, diff %q", i, a == b, d)
		}
	}
}

// TestUnifiedDiffLarge: a text too large for the LCS table still gives a
// diff that applies, and the common head and tail stay out of it.
func TestUnifiedDiffLarge(t *testing.T) {
	var a, b strings.Builder
	a.WriteString("head\n")
	b.WriteString("head\n")
	for i := range 3000 {
		fmt.Fprintf(&a, "a%d\n", i)
		fmt.Fprintf(&b, "b%d\n", i)
	}
	a.WriteString("tail\n")
	b.WriteString("tail\n")
	d := unifiedDiff(a.String(), b.String(), "a", "b")
	if got, err := applyUnified(a.String(), d); err != nil || got != b.String() {
		t.Fatalf("the diff does not apply: %v", err)
	}
	if !strings.HasPrefix(d, "--- a\n+++ b\n@@ -1,3002 +1,3002 @@\n head\n-a0\n") {
		t.Errorf("diff starts %q", d[:60])
	}
}

// applyUnified applies a unified diff to a, checking that each context
// and removed line is a's.
func applyUnified(a, d string) (string, error) {
	src := splitLines(a)
	var out []string
	pos := 0
	lines := splitLines(d)
	for k := 0; k < len(lines); k++ {
		l := lines[k]
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") {
			continue
		}
		if strings.HasPrefix(l, "@@ ") {
			var as, ac, bs, bc int
			if _, err := fmt.Sscanf(normalizeHeader(l), "@@ -%d,%d +%d,%d @@", &as, &ac, &bs, &bc); err != nil {
				return "", fmt.Errorf("header %q: %w", l, err)
			}
			start := as - 1
			if ac == 0 {
				start = as
			}
			if start < pos {
				return "", fmt.Errorf("hunk %q overlaps", l)
			}
			out = append(out, src[pos:start]...)
			pos = start
			continue
		}
		body := l[1:]
		if k+1 < len(lines) && lines[k+1] == "\\ No newline at end of file\n" {
			body = strings.TrimSuffix(body, "\n")
			k++
		}
		switch l[0] {
		case ' ', '-':
			if pos >= len(src) || src[pos] != body {
				return "", fmt.Errorf("line %d: %q is not a's %d", k, body, pos)
			}
			if l[0] == ' ' {
				out = append(out, body)
			}
			pos++
		case '+':
			out = append(out, body)
		default:
			return "", fmt.Errorf("line %q", l)
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, ""), nil
}

// normalizeHeader writes the counts a header leaves out (1).
func normalizeHeader(h string) string {
	f := strings.Fields(h)
	for i := 1; i <= 2; i++ {
		if !strings.Contains(f[i], ",") {
			f[i] += ",1"
		}
	}
	return strings.Join(f, " ")
}
