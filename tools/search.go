package tools

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
)

const (
	maxGlobMatches = 1000
	maxGrepMatches = 1000
	maxGrepLine    = 500
	maxGrepBytes   = 100 << 20 // grep reads at most this much in all
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
// Pattern and lists them as path:line:text. It skips binary files, files
// that are not regular files and files over maxFileBytes, and reads at
// most maxGrepBytes in all.
func (w *Workspace) Grep(in *GrepInput) (string, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return "", &Error{Code: CodeInvalidInput, Msg: "invalid pattern", Err: err}
	}
	base, err := w.rel(in.Path)
	if err != nil {
		return "", err
	}
	g := grep{re: re, maxOutput: w.opts.MaxOutputBytes, budget: maxGrepBytes}
	err = w.walk(base, func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := w.grepRead(rel, &g.budget)
		if err != nil {
			fmt.Fprintf(&g.out, "[output truncated: grep reads at most %d bytes in all]\n", maxGrepBytes)
			return err
		}
		return g.search(rel, data)
	})
	if err != nil {
		return "", err
	}
	if g.count == 0 && g.out.Len() == 0 {
		return "no matches", nil
	}
	return truncate(g.out.String(), w.opts.MaxOutputBytes), nil
}

// grep is the state of one grep call.
type grep struct {
	re        *regexp.Regexp
	maxOutput int
	budget    int64 // bytes left to read
	out       strings.Builder
	count     int
}

// search adds the lines of data, the file rel, that match.
func (g *grep) search(rel string, data []byte) error {
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		return nil // binary
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFileBytes)
	for line := 1; sc.Scan(); line++ {
		if !g.re.Match(sc.Bytes()) {
			continue
		}
		if g.count == maxGrepMatches || g.out.Len() > g.maxOutput {
			fmt.Fprintf(&g.out, "[output truncated: stopped after %d matches]\n", g.count)
			return fs.SkipAll
		}
		text := sc.Text()
		if len(text) > maxGrepLine {
			text = text[:maxGrepLine] + "…"
		}
		fmt.Fprintf(&g.out, "%s:%d:%s\n", rel, line, text)
		g.count++
	}
	return nil
}

// grepRead reads the file rel for grep, charging what it reads to *budget.
// It returns no data for a file to skip (unreadable, not a regular file or
// over maxFileBytes), and fs.SkipAll once the budget is spent.
func (w *Workspace) grepRead(rel string, budget *int64) ([]byte, error) {
	f, fi, err := w.openRegular(filepath.FromSlash(rel), os.O_RDONLY, 0)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	limit := min(maxFileBytes, *budget)
	data, err := readAtMost(f, fi.Size(), limit)
	switch {
	case err == nil:
		*budget -= int64(len(data))
		return data, nil
	case !errors.Is(err, errOverLimit) || fi.Size() > maxFileBytes:
		return nil, nil // unreadable, or too large to search
	case limit < maxFileBytes:
		return nil, fs.SkipAll // the budget is spent
	}
	*budget -= limit // it grew past maxFileBytes as it was read
	return nil, nil
}

// walk visits base, a file or a directory tree inside the root, calling fn
// with the slash-separated workspace path of every file that is neither a
// directory nor a symbolic link. It does not follow symbolic links below
// base, skips .git and node_modules and unreadable directories, and opens
// nothing but directories; fn may return fs.SkipAll to stop.
func (w *Workspace) walk(base string, fn func(rel string, d fs.DirEntry) error) error {
	fi, err := w.root.Stat(base)
	if err != nil {
		return fsError(base, err)
	}
	slash := filepath.ToSlash(base)
	switch {
	case fi.IsDir():
		var entries []fs.DirEntry
		if entries, err = w.readDir(slash); err == nil {
			err = w.walkEntries(slash, entries, fn)
		}
	case fi.Mode().IsRegular():
		err = fn(slash, fs.FileInfoToDirEntry(fi))
	default:
		return notRegular(base, fi.Mode())
	}
	if errors.Is(err, fs.SkipAll) {
		return nil
	}
	return fsError(base, err)
}

// walkEntries visits the entries of the directory dir and the trees below
// them, in lexical order.
func (w *Workspace) walkEntries(dir string, entries []fs.DirEntry, fn func(rel string, d fs.DirEntry) error) error {
	for _, d := range entries {
		p := path.Join(dir, d.Name())
		var err error
		switch {
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules"):
		case d.IsDir():
			if sub, rerr := w.readDir(p); rerr == nil {
				err = w.walkEntries(p, sub, fn)
			}
		case d.Type()&fs.ModeSymlink == 0:
			err = fn(p, d)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readDir lists the directory dir sorted by name. It opens dir without
// blocking and as a directory only, so that a FIFO put in its place
// cannot stall the walk.
func (w *Workspace) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := w.root.OpenFile(filepath.FromSlash(dir), os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}
