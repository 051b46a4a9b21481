package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/reinsdev/reins/internal/outcomes"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// rubricParam is the rubric of a user.define_outcome as sent: a text, or
// a file of the Files API.
type rubricParam struct {
	Type    string  `json:"type"`
	Content *string `json:"content,omitempty"`
	FileID  string  `json:"file_id,omitempty"`
}

// decodeDefineOutcome checks the fields of a user.define_outcome and sets
// them on ev. A file rubric is resolved to its text by resolveRubric; the
// sessions service gives the outcome its id and default max_iterations.
func decodeDefineOutcome(field string, p eventParam, ev *ma.Event) error {
	if p.Description == nil || strings.TrimSpace(*p.Description) == "" {
		return badRequest("%s.description: required (what the agent should produce)", field)
	}
	if len(p.Rubric) == 0 || string(p.Rubric) == "null" {
		return badRequest("%s.rubric: required ({\"type\":\"text\",\"content\":…} or {\"type\":\"file\",\"file_id\":…})", field)
	}
	var r rubricParam
	if err := decodeBytes(p.Rubric, &r); err != nil {
		return fieldPrefix(field+".rubric: ", err)
	}
	switch r.Type {
	case "text":
		if r.FileID != "" {
			return badRequest("%s.rubric.file_id: only allowed with type \"file\"", field)
		}
		if r.Content == nil || strings.TrimSpace(*r.Content) == "" {
			return badRequest("%s.rubric.content: required", field)
		}
		if n := utf8.RuneCountInString(*r.Content); n > outcomes.MaxRubric {
			return badRequest("%s.rubric.content: at most %d characters, got %d", field, outcomes.MaxRubric, n)
		}
	case "file":
		if r.Content != nil {
			return badRequest("%s.rubric.content: only allowed with type \"text\"", field)
		}
		if r.FileID == "" {
			return badRequest("%s.rubric.file_id: required", field)
		}
	default:
		return badRequest("%s.rubric.type: must be text or file; got %q", field, r.Type)
	}
	if p.MaxIterations != nil && (*p.MaxIterations < 1 || *p.MaxIterations > outcomes.MaxIterations) {
		return badRequest("%s.max_iterations: must be 1 to %d (null or absent: %d); got %d", field, outcomes.MaxIterations,
			outcomes.DefaultMaxIterations, *p.MaxIterations)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	ev.Description, ev.Rubric, ev.MaxIterations = *p.Description, raw, p.MaxIterations
	return nil
}

// rubricFiles reads the file of a file rubric.
type rubricFiles interface {
	GetFile(ctx context.Context, id string) (store.File, error)
	ReadFileChunk(ctx context.Context, id string, n int) ([]byte, error)
}

// maxRubricFile bounds the bytes of a rubric file (MaxRubric characters
// of up to four bytes).
const maxRubricFile = 4 * outcomes.MaxRubric

// resolveRubric replaces a file rubric by its text, as the echo carries
// it: the file must be a file of the Files API in the request's workspace,
// text (text/*, application/json) in UTF-8, of at most MaxRubric
// characters.
func resolveRubric(ctx context.Context, files rubricFiles, field string, ev *ma.Event) error {
	var r rubricParam
	if ev.Type != ma.EventUserDefineOutcome || json.Unmarshal(ev.Rubric, &r) != nil || r.Type != "file" {
		return nil
	}
	f := field + ".rubric.file_id"
	meta, err := files.GetFile(ctx, r.FileID)
	if errors.Is(err, store.ErrNotFound) || err == nil && expired(meta.File, time.Now()) {
		return notFound("%s: file %s not found", f, r.FileID)
	}
	if err != nil {
		return err
	}
	if mt := meta.MimeType; !strings.HasPrefix(mt, "text/") && mt != "application/json" {
		return badRequest("%s: file %s is %s; a rubric file is text (text/*, application/json)", f, r.FileID, mt)
	}
	if meta.SizeBytes > maxRubricFile {
		return badRequest("%s: file %s has %d bytes; a rubric is at most %d characters", f, r.FileID, meta.SizeBytes, outcomes.MaxRubric)
	}
	data := make([]byte, 0, meta.SizeBytes)
	for n := 0; int64(len(data)) < meta.SizeBytes; n++ {
		chunk, err := files.ReadFileChunk(ctx, r.FileID, n)
		if err != nil {
			return err
		}
		data = append(data, chunk...)
	}
	text := string(data)
	switch n := utf8.RuneCountInString(text); {
	case !utf8.ValidString(text):
		return badRequest("%s: file %s is not UTF-8 text", f, r.FileID)
	case n > outcomes.MaxRubric:
		return badRequest("%s: file %s has %d characters; a rubric is at most %d", f, r.FileID, n, outcomes.MaxRubric)
	case strings.TrimSpace(text) == "":
		return badRequest("%s: file %s is empty", f, r.FileID)
	}
	ev.Rubric, err = json.Marshal(rubricParam{Type: "text", Content: &text})
	return err
}
