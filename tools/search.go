package tools

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

const (
	maxGlobMatches = 1000
	maxGrepMatches = 1000
	maxGrepLine    = 500
)

// Glob lists the files under Path (default the workspace root) whose
// slash-separated relative path matches Pattern; "**" matches any number of
// directories.
func (w *Workspace) Glob(in *GlobInput) (string, error) {
	base, err := w.rel(in.Path)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(in.Pattern, "/") || !validPattern(in.Pattern) {
		return "", errorf(CodeInvalidInput, "pattern %q is not a valid relative glob pattern", in.Pattern)
	}
	pat := strings.Split(in.Pattern, "/")
	var matches []string
	truncated := false
	err = w.walk(base, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		sub := rel
		if base != "." {
			sub = strings.TrimPrefix(rel, filepath.ToSlash(base)+"/")
		}
		if matchSegments(pat, strings.Split(sub, "/")) {
			if len(matches) == maxGlobMatches {
				truncated = true
				return fs.SkipAll
			}
			matches = append(matches, rel)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return "no files match", nil
	}
	out := strings.Join(matches, "\n") + "\n"
	if truncated {
		out += fmt.Sprintf("[output truncated: only the first %d matches are listed]\n", maxGlobMatches)
	}
	return truncate(out, w.opts.MaxOutputBytes), nil
}

func validPattern(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return false
		}
		if _, err := path.Match(seg, ""); err != nil {
			return false
		}
	}
	return true
}

// matchSegments matches path segments against pattern segments, with "**"
// matching zero or more segments.
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegments(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// Grep searches the files under Path (default the workspace root; a file
// searches just that file) for lines matching the regular expression
// Pattern and lists them as path:line:text.
func (w *Workspace) Grep(in *GrepInput) (string, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return "", &Error{Code: CodeInvalidInput, Msg: "invalid pattern", Err: err}
	}
	base, err := w.rel(in.Path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	count := 0
	err = w.walk(base, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err != nil || !info.Mode().IsRegular() || info.Size() > maxFileBytes {
			return nil
		}
		data, err := w.root.ReadFile(filepath.FromSlash(rel))
		if err != nil || bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
			return nil // unreadable or binary
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, maxFileBytes)
		for line := 1; sc.Scan(); line++ {
			if !re.Match(sc.Bytes()) {
				continue
			}
			if count == maxGrepMatches || b.Len() > w.opts.MaxOutputBytes {
				fmt.Fprintf(&b, "[output truncated: stopped after %d matches]\n", count)
				return fs.SkipAll
			}
			text := sc.Text()
			if len(text) > maxGrepLine {
				text = text[:maxGrepLine] + "…"
			}
			fmt.Fprintf(&b, "%s:%d:%s\n", rel, line, text)
			count++
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if count == 0 {
		return "no matches", nil
	}
	return truncate(b.String(), w.opts.MaxOutputBytes), nil
}

// walk visits base (a file or a directory tree) inside the root without
// following symbolic links, with slash-separated workspace paths.
func (w *Workspace) walk(base string, fn func(rel string, d fs.DirEntry) error) error {
	fsys := w.root.FS()
	slash := filepath.ToSlash(base)
	fi, err := fs.Stat(fsys, slash)
	if err != nil {
		return fsError(base, err)
	}
	if !fi.IsDir() {
		return fn(slash, fs.FileInfoToDirEntry(fi))
	}
	err = fs.WalkDir(fsys, slash, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == slash {
				return err
			}
			return nil // skip unreadable entries
		}
		if d.IsDir() && p != slash && (d.Name() == ".git" || d.Name() == "node_modules") {
			return fs.SkipDir
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return fn(p, d)
	})
	return fsError(base, err)
}
