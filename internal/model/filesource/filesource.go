// Package filesource resolves the file sources of the image and document
// blocks a model call carries (files of the Files API) to their content,
// as a model.Provider in front of the model router.
package filesource

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/store"
)

// maxInlineFile bounds a file sent to a model inline: the Messages API's
// own request limit is 32 MB.
const maxInlineFile = 24 << 20

// Files is what a provider reads of the store.
type Files interface {
	GetFile(ctx context.Context, id string) (store.File, error)
	ReadFileChunk(ctx context.Context, id string, n int) ([]byte, error)
}

// fileSources is a model.Provider that replaces the file sources of image
// and document blocks ({"type":"file","file_id":…}, files of the Files
// API, which no model API can see) by the file's content before the call:
// images and PDFs as base64, text files as text documents. The event log
// keeps the file id.
type fileSources struct {
	next  model.Provider
	files Files
}

// New returns a provider that resolves file sources, reading files, before
// it calls next.
func New(next model.Provider, files Files) model.Provider {
	return fileSources{next: next, files: files}
}

// Stream implements model.Provider.
func (f fileSources) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	msgs, err := f.messages(ctx, req.Messages)
	if err != nil {
		return nil, err
	}
	if msgs != nil {
		cp := *req
		cp.Messages = msgs
		req = &cp
	}
	return f.next.Stream(ctx, req, sink)
}

// Check passes model.Router's check through (httpapi.ModelChecker).
func (f fileSources) Check(modelID string) error {
	if c, ok := f.next.(interface{ Check(string) error }); ok {
		return c.Check(modelID)
	}
	return nil
}

// messages returns a copy of msgs with file sources resolved, or nil when
// there are none.
func (f fileSources) messages(ctx context.Context, msgs []model.Message) ([]model.Message, error) {
	var out []model.Message
	for i, m := range msgs {
		blocks, err := f.blocks(ctx, m.Content)
		if err != nil {
			return nil, err
		}
		if blocks == nil {
			continue
		}
		if out == nil {
			out = append([]model.Message(nil), msgs...)
		}
		out[i].Content = blocks
	}
	return out, nil
}

// blocks returns a copy of bs with file sources resolved, or nil when
// there are none.
func (f fileSources) blocks(ctx context.Context, bs []model.Block) ([]model.Block, error) {
	var out []model.Block
	set := func(i int, b model.Block) {
		if out == nil {
			out = append([]model.Block(nil), bs...)
		}
		out[i] = b
	}
	for i, b := range bs {
		switch b.Type {
		case model.BlockToolResult:
			inner, err := f.blocks(ctx, b.Content)
			if err != nil {
				return nil, err
			}
			if inner != nil {
				b.Content = inner
				set(i, b)
			}
		case model.BlockImage, model.BlockDocument:
			var src struct {
				Type   string `json:"type"`
				FileID string `json:"file_id"`
			}
			if json.Unmarshal(b.Source, &src) != nil || src.Type != "file" {
				continue
			}
			resolved, err := f.source(ctx, b.Type, src.FileID)
			if err != nil {
				return nil, err
			}
			b.Source = resolved
			set(i, b)
		}
	}
	return out, nil
}

// source reads a file and returns the inline source that replaces it.
func (f fileSources) source(ctx context.Context, typ model.BlockType, id string) (json.RawMessage, error) {
	meta, err := f.files.GetFile(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalidFile("file %s was deleted; a message that names it cannot be sent to the model", id)
	}
	if err != nil {
		return nil, err
	}
	if meta.SizeBytes > maxInlineFile {
		return nil, invalidFile("file %s has %d bytes; at most %d can be sent to a model", id, meta.SizeBytes, maxInlineFile)
	}
	mt := meta.MimeType
	text := strings.HasPrefix(mt, "text/") || mt == "application/json"
	switch {
	case typ == model.BlockImage && !strings.HasPrefix(mt, "image/"):
		return nil, invalidFile("file %s is %s, not an image", id, mt)
	case typ == model.BlockDocument && mt != "application/pdf" && !text:
		return nil, invalidFile("file %s is %s; documents are PDFs or text", id, mt)
	}
	data := make([]byte, 0, meta.SizeBytes)
	for n := 0; int64(len(data)) < meta.SizeBytes; n++ {
		chunk, err := f.files.ReadFileChunk(ctx, id, n)
		if err != nil {
			return nil, fmt.Errorf("read file %s: %w", id, err)
		}
		data = append(data, chunk...)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != meta.SHA256 {
		return nil, fmt.Errorf("file %s: content does not match its SHA-256", id)
	}
	if typ == model.BlockDocument && text {
		return json.Marshal(map[string]string{"type": "text", "media_type": "text/plain", "data": string(data)})
	}
	return json.Marshal(map[string]string{"type": "base64", "media_type": mt, "data": base64.StdEncoding.EncodeToString(data)})
}

func invalidFile(format string, args ...any) error {
	return &model.Error{Kind: model.KindInvalid, Message: fmt.Sprintf(format, args...)}
}
