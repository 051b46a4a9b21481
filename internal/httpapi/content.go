package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"

	ma "github.com/reinsdev/reins/managedagents"
)

// validateContent checks content blocks: allowed types, and the fields each
// type needs.
func validateContent(field string, blocks []ma.ContentBlock, allowed ...string) error {
	for i, b := range blocks {
		f := fmt.Sprintf("%s[%d]", field, i)
		ok := false
		for _, a := range allowed {
			if b.Type == a {
				ok = true
			}
		}
		if !ok {
			return badRequest("%s.type: must be one of %s; got %q", f, quoteList(allowed), b.Type)
		}
		switch b.Type {
		case "text":
			if b.Text == "" {
				return badRequest("%s.text: required", f)
			}
		case "image", "document":
			if err := validateSource(f+".source", b.Type, b.Source); err != nil {
				return err
			}
		case "search_result":
			if err := validateContent(f+".content", b.Content, "text"); err != nil {
				return err
			}
		case ma.BlockRedacted:
			if b.Text != "" || len(b.Source) > 0 || b.Title != "" || b.Context != "" || len(b.Content) > 0 || len(b.Citations) > 0 {
				return badRequest("%s: a redacted block has only its type", f)
			}
		}
	}
	return nil
}

func validateSource(field, blockType string, raw json.RawMessage) error {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
		FileID    string `json:"file_id"`
	}
	if len(raw) == 0 {
		return badRequest("%s: required", field)
	}
	if err := json.Unmarshal(raw, &src); err != nil {
		return badRequest("%s: must be an object", field)
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" || src.Data == "" {
			return badRequest("%s: base64 sources need media_type and data", field)
		}
	case "url":
		if src.URL == "" {
			return badRequest("%s.url: required", field)
		}
	case "file":
		if src.FileID == "" {
			return badRequest("%s.file_id: required", field)
		}
	case "text":
		if blockType != "document" || src.Data == "" {
			return badRequest("%s: text sources are for documents and need data", field)
		}
	default:
		return badRequest("%s.type: unknown source type %q", field, src.Type)
	}
	return nil
}

// fileStore finds the files that content blocks name.
type fileStore interface {
	GetFile(ctx context.Context, id string) (store.File, error)
}

// checkFiles is checkFileSources over the server's store.
func (s *Server) checkFiles(ctx context.Context, field string, blocks []ma.ContentBlock) error {
	return checkFileSources(ctx, s.cfg.Store, field, blocks)
}

// checkFileSources answers 404 for a file source, in blocks or in the
// content of their blocks, that names no file of the Files API.
func checkFileSources(ctx context.Context, files fileStore, field string, blocks []ma.ContentBlock) error {
	for i, b := range blocks {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkFileSources(ctx, files, f+".content", b.Content); err != nil {
			return err
		}
		var src struct {
			Type   string `json:"type"`
			FileID string `json:"file_id"`
		}
		if len(b.Source) == 0 || json.Unmarshal(b.Source, &src) != nil || src.Type != "file" {
			continue
		}
		meta, err := files.GetFile(ctx, src.FileID)
		if errors.Is(err, store.ErrNotFound) || err == nil && expired(meta.File, time.Now()) {
			return notFound("%s.source.file_id: file %s not found", f, src.FileID)
		}
		if err != nil {
			return err
		}
		if b.Type == "image" && !strings.HasPrefix(meta.MimeType, "image/") {
			return badRequest("%s.source: file %s is %s, not an image", f, src.FileID, meta.MimeType)
		}
	}
	return nil
}
