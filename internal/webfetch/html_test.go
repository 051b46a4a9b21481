package webfetch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTMLText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`<html><head><title> A &amp; B </title><style>x{}</style></head><body><p>one</p><p>two <i>three</i></p></body></html>`,
			"Title: A & B\n\none\n\ntwo three"},
		{`<script>alert(1)</script>text<noscript>no</noscript>`, "text"},
		{`<ul><li>a</li><li>b</li></ul>`, "a\n\nb"},
		{`plain &lt;tag&gt;`, "plain <tag>"},
		{`<p>unclosed <script>never`, "unclosed"},
		{`<svg/>after`, "after"},
	} {
		if got := HTMLText(c.in); got != c.want {
			t.Errorf("HTMLText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzHTMLText(f *testing.F) {
	f.Add(`<html><head><title>t</title></head><body><p>x &amp; y</p><script>z</script></body></html>`)
	f.Add(`<<<>>>&&;</script><style>`)
	f.Fuzz(func(t *testing.T, doc string) {
		out := HTMLText(doc)
		if strings.Contains(out, "\n\n\n") {
			t.Fatalf("three newlines in %q", out)
		}
		if utf8.ValidString(doc) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", out)
		}
	})
}
