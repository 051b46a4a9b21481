package httpapi

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
	"go.yaml.in/yaml/v4"
)

// Skill upload limits.
const (
	// maxSkillFiles bounds the files of one skill version.
	maxSkillFiles = 1000
	// maxSkillPath bounds the length of one file's path.
	maxSkillPath = 1024
	// maxFrontMatter bounds what is read of SKILL.md to find its front
	// matter.
	maxFrontMatter = 64 << 10
	// skillMD is the file every skill has at the root of its directory.
	skillMD = "SKILL.md"
)

// skillUpload is a skill version's upload, checked: its files, its
// SKILL.md front matter, and the display name given with it.
type skillUpload struct {
	spool       *os.File // the uploaded bytes: the parts, or the zip
	files       []skillFile
	name        string // front matter's name
	description string // front matter's description
	displayName string
	archived    bool // the upload was one zip archive
}

// skillFile is one file of an upload: its path below the top-level
// directory and where to read it.
type skillFile struct {
	rel  string
	open func() (io.ReadCloser, error)
}

func (u *skillUpload) close() {
	if u != nil && u.spool != nil {
		u.spool.Close()
		os.Remove(u.spool.Name())
	}
}

// readSkillUpload reads a multipart skill upload: files[] parts whose
// file names are paths under one top-level directory, or a single zip
// archive of such a directory, and display_name (withDisplayName only).
// Every problem is a 400 naming it; content past the size limit is a 413.
func (k *skillAPI) readSkillUpload(r *http.Request, withDisplayName bool) (*skillUpload, error) {
	limit := k.maxSize
	if r.ContentLength > limit+multipartSlack {
		return nil, skillTooLarge(limit)
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, badRequest("request body: must be multipart/form-data with files[] parts")
	}
	if err := os.MkdirAll(k.spoolDir, 0o700); err != nil {
		return nil, err
	}
	spool, err := os.CreateTemp(k.spoolDir, "skill-*")
	if err != nil {
		return nil, err
	}
	u := &skillUpload{spool: spool}
	ok := false
	defer func() {
		if !ok {
			u.close()
		}
	}()
	parts, err := u.readParts(multipart.NewReader(r.Body, params["boundary"]), limit, withDisplayName)
	if err != nil {
		return nil, err
	}
	if err := u.collect(parts, limit); err != nil {
		return nil, err
	}
	if err := u.check(); err != nil {
		return nil, err
	}
	ok = true
	return u, nil
}

// uploadPart is a files[] part of a skill upload: its file name, and
// where its bytes are in the spool.
type uploadPart struct {
	name      string
	off, size int64
}

// readParts copies the files[] parts of an upload to its spool, up to
// limit bytes in all, and reads its display name (withDisplayName only).
func (u *skillUpload) readParts(mr *multipart.Reader, limit int64, withDisplayName bool) ([]uploadPart, error) {
	var parts []uploadPart
	var total int64
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, skillReadError(err, limit)
		}
		switch field := p.FormName(); {
		case field == "files[]" || field == "files":
			if len(parts) == maxSkillFiles {
				return nil, badRequest("files[]: at most %d files", maxSkillFiles)
			}
			n, err := io.Copy(u.spool, io.LimitReader(p, limit-total+1))
			if err != nil {
				return nil, skillReadError(err, limit)
			}
			if total += n; total > limit {
				return nil, skillTooLarge(limit)
			}
			parts = append(parts, uploadPart{name: partFileName(p), off: total - n, size: n})
		case withDisplayName && (field == "display_name" || field == "display_title"):
			b, err := io.ReadAll(io.LimitReader(p, 1024))
			if err != nil {
				return nil, skillReadError(err, limit)
			}
			u.displayName = string(b)
			if err := checkDisplayName(field, u.displayName); err != nil {
				return nil, err
			}
		case withDisplayName:
			return nil, badRequest("%s: unknown field (a skill upload takes files[] and display_name)", field)
		default:
			return nil, badRequest("%s: unknown field (a skill version upload takes files[] only)", field)
		}
	}
	if len(parts) == 0 {
		return nil, badRequest("files[]: required: the skill's files, or one zip archive of its directory")
	}
	return parts, nil
}

// collect makes the upload's files: the entries of its one part when
// that is a zip archive, else its parts.
func (u *skillUpload) collect(parts []uploadPart, limit int64) error {
	if len(parts) == 1 && isZipPart(u.spool, parts[0].name, parts[0].size) {
		u.archived = true
		return u.readZip(parts[0].name, parts[0].size, limit)
	}
	for _, p := range parts {
		sec := io.NewSectionReader(u.spool, p.off, p.size)
		u.files = append(u.files, skillFile{rel: p.name, open: func() (io.ReadCloser, error) {
			return io.NopCloser(io.NewSectionReader(sec, 0, sec.Size())), nil
		}})
	}
	return nil
}

func skillTooLarge(limit int64) *apiError {
	return errf(http.StatusRequestEntityTooLarge, ma.ErrRequestTooLarge, "files[]: the skill's files are larger than the %d bytes this server accepts", limit)
}

// skillReadError is uploadReadError for a skill upload.
func skillReadError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return skillTooLarge(limit)
	}
	return uploadReadError(err)
}

// partFileName is a part's file name as sent: multipart.Part.FileName
// keeps its last element only, and a skill's files are named by path.
func partFileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// isZipPart reports whether the only part of an upload is a zip archive:
// named *.zip, or starting with a zip's signature.
func isZipPart(f *os.File, name string, size int64) bool {
	if strings.HasSuffix(strings.ToLower(name), ".zip") {
		return true
	}
	var magic [4]byte
	n, _ := f.ReadAt(magic[:], 0)
	return size >= 4 && n == 4 && string(magic[:]) == "PK\x03\x04"
}

// readZip lists the files of an uploaded zip archive.
func (u *skillUpload) readZip(name string, size, limit int64) error {
	zr, err := zip.NewReader(u.spool, size)
	if err != nil {
		return badRequest("files[]: %q is not a valid zip archive: %v", name, err)
	}
	var total uint64
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") && f.UncompressedSize64 == 0 {
			continue // a directory
		}
		if !f.Mode().IsRegular() {
			return badRequest("files[]: %q in the archive is not a regular file (%s)", f.Name, f.Mode().Type())
		}
		if len(u.files) == maxSkillFiles {
			return badRequest("files[]: the archive has more than %d files", maxSkillFiles)
		}
		if total += f.UncompressedSize64; total > uint64(limit) {
			return errf(http.StatusRequestEntityTooLarge, ma.ErrRequestTooLarge, "files[]: the archive's files are larger than the %d bytes this server accepts", limit)
		}
		u.files = append(u.files, skillFile{rel: f.Name, open: func() (io.ReadCloser, error) {
			rc, err := f.Open()
			if err != nil {
				return nil, badRequest("files[]: %q in the archive cannot be read: %v", f.Name, err)
			}
			return zipEntry{rc, f.Name}, nil
		}})
	}
	return nil
}

// zipEntry reads an entry of an uploaded archive; a corrupt one (its size
// or CRC-32 wrong) is a 400 naming it.
type zipEntry struct {
	io.ReadCloser
	name string
}

func (z zipEntry) Read(p []byte) (int, error) {
	n, err := z.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = badRequest("files[]: %q in the archive is corrupt: %v", z.name, err)
	}
	return n, err
}

// check validates the paths (one top-level directory, nothing escaping
// it, no duplicate) and SKILL.md's front matter. Paths become relative
// to the top-level directory.
func (u *skillUpload) check() error {
	top := ""
	seen := map[string]bool{}
	var md *skillFile
	for i := range u.files {
		f := &u.files[i]
		dir, rel, err := splitSkillPath(f.rel)
		if err != nil {
			return err
		}
		if top == "" {
			top = dir
		} else if dir != top {
			return badRequest("files[]: the files are in two top-level directories, %q and %q; a skill's files must all be in one directory", top, dir)
		}
		if seen[rel] {
			return badRequest("files[]: %q is given twice", f.rel)
		}
		seen[rel] = true
		f.rel = rel
		if rel == skillMD {
			md = f
		}
	}
	if md == nil {
		return badRequest("files[]: no %s at the root of the skill's directory %q (it must be %s/%s)", skillMD, top, top, skillMD)
	}
	r, err := md.open()
	if err != nil {
		return err
	}
	defer r.Close()
	head, err := io.ReadAll(io.LimitReader(r, maxFrontMatter))
	if err != nil {
		return err
	}
	u.name, u.description, err = parseFrontMatter(head)
	return err
}

// splitSkillPath splits an uploaded file's path into its top-level
// directory and the rest, refusing paths that are absolute, climb out
// (..), or are not under a directory.
func splitSkillPath(p string) (top, rel string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", badRequest("files[]: file name %q %s", p, why)
	}
	switch {
	case p == "":
		return bad("is empty: each file part's filename must be its path, like my-skill/SKILL.md")
	case len(p) > maxSkillPath:
		return bad(fmt.Sprintf("is longer than %d bytes", maxSkillPath))
	case strings.ContainsAny(p, "\\\x00") || strings.ContainsFunc(p, func(r rune) bool { return r < ' ' }):
		return bad("has a backslash or a control character")
	case strings.HasPrefix(p, "/"):
		return bad("is absolute: paths must be relative, like my-skill/SKILL.md")
	}
	segs := strings.Split(strings.TrimPrefix(p, "./"), "/")
	for _, s := range segs {
		switch s {
		case "..":
			return bad("escapes the skill's directory (..)")
		case "", ".":
			return bad("has an empty or . element")
		}
	}
	if len(segs) < 2 {
		return bad("is not under a top-level directory: name the files like my-skill/SKILL.md")
	}
	return segs[0], strings.Join(segs[1:], "/"), nil
}

var (
	skillName = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	xmlTag    = regexp.MustCompile(`<[^<>]*>`)
)

// parseFrontMatter reads SKILL.md's YAML front matter (between --- lines
// at its start) and checks name and description as Anthropic does: name
// of 1 to 64 lowercase letters, digits and hyphens, without "anthropic"
// or "claude"; description non-empty, at most 1024 characters; neither
// with XML tags.
func parseFrontMatter(b []byte) (name, description string, err error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxFrontMatter)
	if !sc.Scan() || strings.TrimRight(sc.Text(), " \t\r") != "---" {
		return "", "", badRequest("SKILL.md: must start with YAML front matter: a --- line, name: and description:, and a closing --- line")
	}
	var yml strings.Builder
	closed := false
	for sc.Scan() {
		if strings.TrimRight(sc.Text(), " \t\r") == "---" {
			closed = true
			break
		}
		yml.WriteString(sc.Text())
		yml.WriteByte('\n')
	}
	if !closed {
		return "", "", badRequest("SKILL.md: the front matter has no closing --- line (within its first %d bytes)", maxFrontMatter)
	}
	var fm map[string]any
	if err := yaml.Unmarshal([]byte(yml.String()), &fm); err != nil {
		return "", "", badRequest("SKILL.md: the front matter is not valid YAML: %v", err)
	}
	str := func(key string) (string, error) {
		v, ok := fm[key]
		if !ok || v == nil {
			return "", badRequest("SKILL.md: the front matter has no %s", key)
		}
		s, ok := v.(string)
		if !ok {
			return "", badRequest("SKILL.md: the front matter's %s must be a string", key)
		}
		return strings.TrimSpace(s), nil
	}
	if name, err = str("name"); err != nil {
		return "", "", err
	}
	if !skillName.MatchString(name) {
		return "", "", badRequest("SKILL.md: name %q must be 1 to 64 lowercase letters, digits and hyphens", name)
	}
	for _, w := range []string{"anthropic", "claude"} {
		if strings.Contains(name, w) {
			return "", "", badRequest("SKILL.md: name %q contains the reserved word %q", name, w)
		}
	}
	if description, err = str("description"); err != nil {
		return "", "", err
	}
	switch {
	case description == "":
		return "", "", badRequest("SKILL.md: description must not be empty")
	case len([]rune(description)) > 1024:
		return "", "", badRequest("SKILL.md: description has %d characters, more than 1024", len([]rune(description)))
	case xmlTag.MatchString(description):
		return "", "", badRequest("SKILL.md: description must not contain XML tags")
	}
	return name, description, nil
}

// checkDisplayName checks a skill's display name: one line of at most
// 255 characters.
func checkDisplayName(field, s string) error {
	if strings.ContainsAny(s, "\r\n") {
		return badRequest("%s: must be a single line", field)
	}
	return checkLen(field, s, 0, 255)
}

// skillArchive is a version's content as stored: a zip of its files under
// the directory named after the skill.
type skillArchive struct {
	f      *os.File
	size   int64
	sha256 string
}

func (a *skillArchive) close() {
	if a != nil && a.f != nil {
		a.f.Close()
		os.Remove(a.f.Name())
	}
}

// archive writes the upload's files as a zip under <name>/, counting and
// hashing it.
func (u *skillUpload) archive(dir string, modified time.Time) (*skillArchive, error) {
	f, err := os.CreateTemp(dir, "skill-zip-*")
	if err != nil {
		return nil, err
	}
	a := &skillArchive{f: f}
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	zw := zip.NewWriter(cw)
	for _, sf := range u.files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: path.Join(u.name, sf.rel), Method: zip.Deflate, Modified: modified})
		if err == nil {
			err = copyFrom(w, sf)
		}
		if err != nil {
			a.close()
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		a.close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		a.close()
		return nil, err
	}
	a.size, a.sha256 = cw.n, hex.EncodeToString(h.Sum(nil))
	return a, nil
}

// copyFrom copies a file of the upload to w.
func copyFrom(w io.Writer, f skillFile) error {
	r, err := f.open()
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}

// countWriter counts what is written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
