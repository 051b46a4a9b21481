package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// File limits.
const (
	// DefaultMaxFileSize bounds one upload's content.
	DefaultMaxFileSize = 100 << 20
	// multipartSlack is what a multipart body may carry beyond the file:
	// boundaries, part headers and the small form fields.
	multipartSlack = 64 << 10
	// Bounds of expires_in_seconds (the SDK's documented range).
	minFileTTL = 3600
	maxFileTTL = 7776000
	// maxFileIDs bounds the ids[] filter of the files list.
	maxFileIDs = 100
)

// fileAPI serves the Files API.
type fileAPI struct {
	st store.Files
	// spoolDir holds uploads while they arrive; maxSize bounds one.
	spoolDir string
	maxSize  int64
	log      *slog.Logger
}

// fileRoutes registers the Files API.
func (s *Server) fileRoutes() {
	f := &fileAPI{st: s.cfg.Store, spoolDir: s.cfg.FileSpoolDir, maxSize: s.cfg.MaxFileSize, log: s.log}
	s.handle("POST /v1/files", f.maxSize+multipartSlack, f.uploadFile)
	s.handle("GET /v1/files", smallBody, f.listFiles)
	s.handle("GET /v1/files/{id}", smallBody, f.getFile)
	s.handle("DELETE /v1/files/{id}", smallBody, noBody(f.deleteFile))
	s.handle("GET /v1/files/{id}/content", smallBody, f.downloadFile)
}

func tooLarge(limit int64) *apiError {
	return errf(http.StatusRequestEntityTooLarge, ma.ErrRequestTooLarge, "file: larger than the %d bytes this server accepts", limit)
}

// spooled is an upload's content, written to a temporary file while it was
// counted and hashed.
type spooled struct {
	f      *os.File
	size   int64
	sha256 string
	head   []byte // the first bytes, to sniff the type
	name   string // the part's file name
	ctype  string // the part's Content-Type
}

func (sp *spooled) close() {
	if sp != nil && sp.f != nil {
		sp.f.Close()
		os.Remove(sp.f.Name())
	}
}

func (fa *fileAPI) uploadFile(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > fa.maxSize+multipartSlack {
		return tooLarge(fa.maxSize)
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return badRequest("request body: must be multipart/form-data with a file part")
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var sp *spooled
	defer func() { sp.close() }()
	var ttl int64
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadReadError(err)
		}
		switch part.FormName() {
		case "file":
			if sp != nil {
				return badRequest("file: only one file per upload")
			}
			if sp, err = fa.spool(part); err != nil {
				return err
			}
		case "expires_in_seconds":
			b, err := io.ReadAll(io.LimitReader(part, 32))
			if err != nil {
				return uploadReadError(err)
			}
			ttl, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil || ttl < minFileTTL || ttl > maxFileTTL {
				return badRequest("expires_in_seconds: must be an integer from %d to %d, got %q", minFileTTL, maxFileTTL, b)
			}
		default:
			return badRequest("%s: unknown field", part.FormName())
		}
	}
	if sp == nil {
		return badRequest("file: required")
	}
	f := newFile(sp, ttl)
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := fa.st.CreateFile(r.Context(), f, sp.f); err != nil {
		return err
	}
	writeJSON(w, f.File)
	return nil
}

// uploadReadError answers a failed read of an upload: 413 past the body
// limit, the body timeout's 408, else 400.
func uploadReadError(err error) error {
	var mbe *http.MaxBytesError
	var ae *apiError
	switch {
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit - multipartSlack)
	case errors.As(err, &ae):
		return ae
	}
	return badRequest("request body: cannot read the multipart form: %v", err)
}

// spool copies a file part to a temporary file, counting and hashing it,
// so that the store's transaction does not wait on the client.
func (fa *fileAPI) spool(part *multipart.Part) (*spooled, error) {
	sp, err := spoolReader(fa.spoolDir, part, fa.maxSize, uploadReadError)
	if err != nil {
		return nil, err
	}
	sp.name, sp.ctype = part.FileName(), part.Header.Get("Content-Type")
	return sp, nil
}

// spoolReader copies r to a temporary file in dir, counting and hashing
// it; more than max bytes is a 413 error, and readErr maps an error
// reading r.
func spoolReader(dir string, r io.Reader, max int64, readErr func(error) error) (*spooled, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, "upload-*")
	if err != nil {
		return nil, err
	}
	sp := &spooled{f: tmp}
	h := sha256.New()
	head := &headWriter{max: 512}
	n, err := io.Copy(io.MultiWriter(tmp, h, head), io.LimitReader(r, max+1))
	if err != nil {
		sp.close()
		return nil, readErr(err)
	}
	if n > max {
		sp.close()
		return nil, tooLarge(max)
	}
	sp.size, sp.sha256, sp.head = n, hex.EncodeToString(h.Sum(nil)), head.b
	return sp, nil
}

// StoreOutput stores the content of r, a file an agent wrote, as a file
// of the session's scope named name (a path): its type comes from the
// name's extension, else from its first bytes. Content over max bytes is
// an error, and nothing is stored.
func StoreOutput(ctx context.Context, st store.Files, spoolDir string, r io.Reader, max int64, sessionID, name string) (store.File, error) {
	sp, err := spoolReader(spoolDir, r, max, func(err error) error { return err })
	if err != nil {
		return store.File{}, err
	}
	defer sp.close()
	sp.name = name
	f := newFile(sp, 0)
	f.Filename = name
	f.Scope = &ma.FileScope{ID: sessionID, Type: "session"}
	if _, err := sp.f.Seek(0, io.SeekStart); err != nil {
		return store.File{}, err
	}
	if err := st.CreateFile(ctx, f, sp.f); err != nil {
		return store.File{}, err
	}
	return f, nil
}

// headWriter keeps the first max bytes written to it.
type headWriter struct {
	b   []byte
	max int
}

func (h *headWriter) Write(p []byte) (int, error) {
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// newFile is the metadata of an upload.
func newFile(sp *spooled, ttl int64) store.File {
	now := time.Now()
	mimeType := fileMimeType(sp)
	f := store.File{File: ma.File{ID: ids.New(ids.File), Type: "file", Filename: fileName(sp.name, mimeType), MimeType: mimeType,
		SizeBytes: sp.size, CreatedAt: ma.Time(now), Downloadable: true}, SHA256: sp.sha256}
	if ttl > 0 {
		exp := ma.Time(now.Add(time.Duration(ttl) * time.Second))
		f.ExpiresAt = &exp
	}
	return f
}

// fileMimeType is the part's declared type unless it is the generic
// application/octet-stream; then the file name's extension, then the
// content's first bytes decide.
func fileMimeType(sp *spooled) string {
	if mt, _, err := mime.ParseMediaType(sp.ctype); err == nil && mt != "application/octet-stream" {
		return mt
	}
	if ext := path.Ext(sp.name); ext != "" {
		if mt, _, err := mime.ParseMediaType(mime.TypeByExtension(ext)); err == nil {
			return mt
		}
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(sp.head))
	return mt
}

// fileName keeps the last path component of the part's file name; an empty
// one is "unnamed" with the type's extension.
func fileName(name, mimeType string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name != "." && name != "/" && name != "" {
		return name
	}
	name = "unnamed"
	if exts, _ := mime.ExtensionsByType(mimeType); len(exts) > 0 {
		name += exts[0]
	}
	return name
}

// liveFile returns a file that exists and has not expired.
func (fa *fileAPI) liveFile(r *http.Request, id string) (store.File, error) {
	f, err := fa.st.GetFile(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || err == nil && expired(f.File, time.Now()) {
		return f, notFound("file %s not found", id)
	}
	return f, err
}

func expired(f ma.File, now time.Time) bool {
	if f.ExpiresAt == nil {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, *f.ExpiresAt)
	return err == nil && !now.Before(t)
}

func (fa *fileAPI) getFile(w http.ResponseWriter, r *http.Request) error {
	f, err := fa.liveFile(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, f.File)
	return nil
}

func (fa *fileAPI) deleteFile(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := fa.st.DeleteFile(r.Context(), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound("file %s not found", id)
		}
		return err
	}
	writeJSON(w, ma.Deleted{ID: id, Type: "file_deleted"})
	return nil
}

func (fa *fileAPI) listFiles(w http.ResponseWriter, r *http.Request) error {
	q := query{r}
	fq := store.FileQuery{ScopeID: q.str("scope_id"), IDs: q.list("ids")}
	fq.Desc = true
	if len(fq.IDs) > 0 {
		if q.str("page") != "" || q.str("limit") != "" {
			return badRequest("ids: cannot be combined with page or limit")
		}
		if len(fq.IDs) > maxFileIDs {
			return badRequest("ids: at most %d ids, got %d", maxFileIDs, len(fq.IDs))
		}
		fq.Limit = maxFileIDs
	} else {
		var err error
		if fq.Limit, err = q.limit(20, 1000); err != nil {
			return err
		}
		if page := q.str("page"); page != "" {
			c, err := decodeCursor(page, "desc")
			if err != nil {
				return err
			}
			fq.After = c.Pos
		}
	}
	items, err := fa.st.ListFiles(r.Context(), fq)
	if err != nil {
		return err
	}
	page := ma.Page[ma.File]{Data: []ma.File{}}
	now := time.Now()
	for _, it := range items {
		if !expired(it.Value.File, now) {
			page.Data = append(page.Data, it.Value.File)
		}
	}
	// The cursor follows what was read, expired files included, so that
	// a page of expired files does not end the list.
	if len(fq.IDs) == 0 && len(items) == fq.Limit {
		page.NextPage = cursor{Pos: items[len(items)-1].Pos, Order: "desc"}.encode()
	}
	writeJSON(w, page)
	return nil
}

func (fa *fileAPI) downloadFile(w http.ResponseWriter, r *http.Request) error {
	f, err := fa.liveFile(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	read := func(ctx context.Context, n int) ([]byte, error) { return fa.st.ReadFileChunk(ctx, f.ID, n) }
	return streamContent(fa.log, w, r, stored{what: "file " + f.ID, size: f.SizeBytes, sha256: f.SHA256, read: read},
		f.MimeType, f.Filename)
}

// stored is content kept in pieces of store.FileChunk bytes, with its size
// and SHA-256.
type stored struct {
	what   string // for the log
	size   int64
	sha256 string
	read   func(ctx context.Context, n int) ([]byte, error)
}

// streamContent answers with stored content, piece by piece, as an
// attachment of the given type and file name; a failure once the headers
// are sent is logged to log and cuts the response.
func streamContent(log *slog.Logger, w http.ResponseWriter, r *http.Request, c stored, mimeType, filename string) error {
	first, err := c.read(r.Context(), 0)
	if errors.Is(err, store.ErrNotFound) && c.size == 0 {
		first, err = nil, nil
	}
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", mimeType)
	h.Set("Content-Length", strconv.FormatInt(c.size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	// Each piece is written once the next is read, and the last once the
	// whole content's SHA-256 matched: a corrupt content is never
	// delivered whole (the client sees a truncated response).
	sum := sha256.New()
	sum.Write(first)
	pending := first
	for n := 1; int64(n)*store.FileChunk < c.size; n++ {
		chunk, err := c.read(r.Context(), n)
		if err != nil {
			abortDownload(log, r, c.what, fmt.Errorf("read piece %d: %w", n, err))
		}
		sum.Write(chunk)
		if _, err := w.Write(pending); err != nil {
			return nil // the client left
		}
		pending = chunk
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != c.sha256 {
		abortDownload(log, r, c.what, fmt.Errorf("content's SHA-256 is %s, stored as %s", got, c.sha256))
	}
	w.Write(pending)
	return nil
}

// abortDownload cuts a download whose headers are sent: the client sees a
// truncated response, never content that is wrong.
func abortDownload(log *slog.Logger, r *http.Request, what string, err error) {
	log.Error("download failed", "content", what, "request_id", requestID(r), "err", err)
	panic(http.ErrAbortHandler)
}
