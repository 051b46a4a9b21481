package tools

import (
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

const maxFileBytes = 10 << 20 // files larger than this are not read whole

// Read returns the lines of a file, numbered, optionally limited to a range.
func (w *Workspace) Read(in *ReadInput) (string, error) {
	rel, err := w.rel(in.FilePath)
	if err != nil {
		return "", err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return "", fsError(in.FilePath, err)
	}
	if fi.IsDir() {
		return "", errorf(CodeInvalidInput, "%s is a directory", in.FilePath)
	}
	if fi.Size() > maxFileBytes {
		return "", errorf(CodeInvalidInput, "%s is %d bytes, over the %d byte limit of read", in.FilePath, fi.Size(), maxFileBytes)
	}
	data, err := w.root.ReadFile(rel)
	if err != nil {
		return "", fsError(in.FilePath, err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	start, end := 1, len(lines)
	if in.ViewRange != nil {
		start = in.ViewRange[0]
		if in.ViewRange[1] != -1 {
			end = min(in.ViewRange[1], len(lines))
		}
		if start > len(lines) && !(start == 1 && len(lines) == 0) {
			return "", errorf(CodeInvalidInput, "view_range starts at line %d but %s has %d lines", start, in.FilePath, len(lines))
		}
	}
	var b strings.Builder
	for i := start; i <= end; i++ {
		fmt.Fprintf(&b, "%6d\t%s", i, strings.TrimSuffix(lines[i-1], "\n"))
		b.WriteByte('\n')
		if b.Len() > w.opts.MaxOutputBytes {
			break
		}
	}
	return truncate(b.String(), w.opts.MaxOutputBytes), nil
}

// Write creates or replaces a file, creating its parent directories.
func (w *Workspace) Write(in *WriteInput) (string, error) {
	if err := w.mutable(); err != nil {
		return "", err
	}
	rel, err := w.rel(in.FilePath)
	if err != nil {
		return "", err
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return "", fsError(in.FilePath, err)
		}
	}
	perm := fs.FileMode(0o644)
	if fi, err := w.root.Stat(rel); err == nil {
		if fi.IsDir() {
			return "", errorf(CodeInvalidInput, "%s is a directory", in.FilePath)
		}
		perm = fi.Mode().Perm()
	}
	if err := w.root.WriteFile(rel, []byte(in.Content), perm); err != nil {
		return "", fsError(in.FilePath, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.FilePath), nil
}

// Edit replaces exact occurrences of OldString with NewString: exactly one
// unless ReplaceAll is set.
func (w *Workspace) Edit(in *EditInput) (string, error) {
	if err := w.mutable(); err != nil {
		return "", err
	}
	rel, err := w.rel(in.FilePath)
	if err != nil {
		return "", err
	}
	fi, err := w.root.Stat(rel)
	if err != nil {
		return "", fsError(in.FilePath, err)
	}
	if fi.IsDir() || fi.Size() > maxFileBytes {
		return "", errorf(CodeInvalidInput, "%s is a directory or too large to edit", in.FilePath)
	}
	data, err := w.root.ReadFile(rel)
	if err != nil {
		return "", fsError(in.FilePath, err)
	}
	n := bytes.Count(data, []byte(in.OldString))
	switch {
	case n == 0:
		return "", errorf(CodeInvalidInput, "old_string was not found in %s", in.FilePath)
	case n > 1 && !in.ReplaceAll:
		return "", errorf(CodeInvalidInput, "old_string occurs %d times in %s; add context to make it unique or set replace_all", n, in.FilePath)
	}
	limit := 1
	if in.ReplaceAll {
		limit = -1
	}
	out := bytes.Replace(data, []byte(in.OldString), []byte(in.NewString), limit)
	if err := w.root.WriteFile(rel, out, fi.Mode().Perm()); err != nil {
		return "", fsError(in.FilePath, err)
	}
	if !in.ReplaceAll {
		n = 1
	}
	return fmt.Sprintf("replaced %d occurrence(s) in %s", n, in.FilePath), nil
}
