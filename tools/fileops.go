package tools

import (
	"bytes"
	"fmt"
	"os"
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
	data, err := w.readRegular(rel, maxFileBytes)
	if err != nil {
		return "", err
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

// Write creates or replaces a file, creating its parent directories. An
// existing file is rewritten in place and keeps its mode and owner.
func (w *Workspace) Write(in *WriteInput) (string, error) {
	if err := w.mutable(); err != nil {
		return "", err
	}
	rel, err := w.rel(in.FilePath)
	if err != nil {
		return "", err
	}
	if err := w.mkdirAll(filepath.Dir(rel)); err != nil {
		return "", err
	}
	f, err := w.create(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := rewrite(f, []byte(in.Content)); err != nil {
		return "", fsError(rel, err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(in.Content), in.FilePath), nil
}

// Edit replaces exact occurrences of OldString with NewString: exactly one
// unless ReplaceAll is set. The file is rewritten in place and keeps its
// mode and owner.
func (w *Workspace) Edit(in *EditInput) (string, error) {
	if err := w.mutable(); err != nil {
		return "", err
	}
	rel, err := w.rel(in.FilePath)
	if err != nil {
		return "", err
	}
	f, fi, err := w.openRegular(rel, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := readAll(f, fi, rel, maxFileBytes)
	if err != nil {
		return "", err
	}
	out, n, err := replace(data, in)
	if err != nil {
		return "", err
	}
	if err := rewrite(f, out); err != nil {
		return "", fsError(rel, err)
	}
	return fmt.Sprintf("replaced %d occurrence(s) in %s", n, in.FilePath), nil
}

// replace applies the edit in to data and returns the result with the
// number of occurrences replaced.
func replace(data []byte, in *EditInput) ([]byte, int, error) {
	n := bytes.Count(data, []byte(in.OldString))
	switch {
	case n == 0:
		return nil, 0, errorf(CodeInvalidInput, "old_string was not found in %s", in.FilePath)
	case n > 1 && !in.ReplaceAll:
		return nil, 0, errorf(CodeInvalidInput, "old_string occurs %d times in %s; add context to make it unique or set replace_all", n, in.FilePath)
	case !in.ReplaceAll:
		return bytes.Replace(data, []byte(in.OldString), []byte(in.NewString), 1), 1, nil
	}
	return bytes.ReplaceAll(data, []byte(in.OldString), []byte(in.NewString)), n, nil
}

// rewrite replaces the content of the open file f with data and closes it.
func rewrite(f *os.File, data []byte) error {
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		return err
	}
	return f.Close()
}
