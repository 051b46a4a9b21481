package httpapi

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzSplitSkillPath checks that an uploaded file's path is either refused
// with a 400 or split into a top-level directory of one element and a
// path below it that stays inside the skill's directory.
func FuzzSplitSkillPath(f *testing.F) {
	for _, s := range []string{"pdf/SKILL.md", "./pdf/a/b.py", "pdf/../x", "/etc/pdf/x", "pdf", "pdf//x", `pdf\x`, "pdf/./x", "a/..", "..", "pdf/x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		top, rel, err := splitSkillPath(p)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 || ae.message == "" {
				t.Fatalf("%q: refusal %v is not a 400", p, err)
			}
			return
		}
		if top == "" || strings.Contains(top, "/") || top == "." || top == ".." {
			t.Fatalf("%q: top-level directory %q", p, top)
		}
		if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
			t.Fatalf("%q: path %q below the directory is not local and clean", p, rel)
		}
	})
}

// FuzzParseFrontMatter checks that any SKILL.md either gives a name and a
// description within Anthropic's rules or is refused with a 400.
func FuzzParseFrontMatter(f *testing.F) {
	for _, s := range []string{
		"---\nname: pdf\ndescription: Reads PDFs.\n---\nbody",
		"---\r\nname: \"pdf\"\r\ndescription: >\r\n  folded\r\n  text\r\n---\r\n",
		"---\nname: [x\n---\n", "---\nname: pdf\n", "no front matter", "---\n---\n", "---\nname: 5\ndescription: x\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		name, desc, err := parseFrontMatter(b)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != 400 || !strings.HasPrefix(ae.message, "SKILL.md: ") {
				t.Fatalf("refusal %v is not a 400 about SKILL.md", err)
			}
			return
		}
		if !skillName.MatchString(name) || desc == "" || len([]rune(desc)) > 1024 {
			t.Fatalf("accepted name %q, description %q", name, desc)
		}
	})
}
