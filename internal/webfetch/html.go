package webfetch

import (
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// skipped are the elements whose content is not text for a reader.
var skipped = map[string]bool{"script": true, "style": true, "head": true, "noscript": true, "template": true, "svg": true, "iframe": true}

// blocks are the elements that start a new line.
var blocks = map[string]bool{
	"p": true, "div": true, "br": true, "li": true, "tr": true, "h1": true, "h2": true, "h3": true,
	"h4": true, "h5": true, "h6": true, "pre": true, "blockquote": true, "section": true, "article": true,
	"header": true, "footer": true, "ul": true, "ol": true, "table": true, "hr": true, "title": true,
	"dt": true, "dd": true, "main": true, "nav": true, "aside": true, "form": true,
}

var (
	spaces     = regexp.MustCompile(`[ \t\r\f\v]+`)
	blankLines = regexp.MustCompile(`\n\s*\n+`)
)

// HTMLText returns the readable text of an HTML document: the tokens of
// golang.org/x/net/html's tokenizer, with entities decoded, scripts,
// styles and the head dropped, and a line break at each block element.
// The title, if any, comes first.
func HTMLText(doc string) string {
	z := html.NewTokenizer(strings.NewReader(doc))
	var b strings.Builder
	var title string
	depth := 0 // inside skipped elements
	inTitle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return finish(title, b.String())
		case html.TextToken:
			switch {
			case inTitle:
				title += string(z.Text())
			case depth == 0:
				b.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "title" {
				inTitle = true
			} else if skipped[tag] && tt == html.StartTagToken {
				depth++
			}
			if blocks[tag] {
				b.WriteString("\n")
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "title" {
				inTitle = false
			} else if skipped[tag] && depth > 0 {
				depth--
			}
			if blocks[tag] {
				b.WriteString("\n")
			}
		}
	}
}

// finish collapses runs of spaces and blank lines.
func finish(title, body string) string {
	lines := strings.Split(spaces.ReplaceAllString(body, " "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	out := strings.TrimSpace(blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
	if t := strings.TrimSpace(spaces.ReplaceAllString(title, " ")); t != "" {
		out = "Title: " + t + "\n\n" + out
	}
	return out
}
