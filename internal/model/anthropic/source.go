package anthropic

import (
	"encoding/base64"
	"encoding/json"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/model"
)

// source is the union of the Managed Agents source objects of image and
// document blocks.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
}

func parseSource(raw json.RawMessage) (source, error) {
	var s source
	if len(raw) == 0 {
		return s, invalidf("missing source")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, invalidf("source is not a JSON object: %v", err)
	}
	return s, nil
}

// imageBlock maps an image source: base64 and url go through; a file
// source names a file of the reins Files API, which the Messages API cannot
// see, so the harness must resolve it before the call.
func imageBlock(raw json.RawMessage) (*anthropic.ImageBlockParam, error) {
	s, err := parseSource(raw)
	if err != nil {
		return nil, err
	}
	img := &anthropic.ImageBlockParam{}
	switch s.Type {
	case "base64":
		if s.MediaType == "" || s.Data == "" {
			return nil, invalidf("image source: base64 needs media_type and data")
		}
		img.Source.OfBase64 = &anthropic.Base64ImageSourceParam{
			MediaType: anthropic.Base64ImageSourceMediaType(s.MediaType),
			Data:      s.Data,
		}
	case "url":
		if s.URL == "" {
			return nil, invalidf("image source: url is empty")
		}
		img.Source.OfURL = &anthropic.URLImageSourceParam{URL: s.URL}
	default:
		return nil, unsupportedSource("image", s)
	}
	return img, nil
}

// documentBlock maps a document: base64 PDFs, PDF urls and plain text go
// through (base64 text/plain is decoded into a text source); other sources
// are KindInvalid.
func documentBlock(b model.Block) (*anthropic.DocumentBlockParam, error) {
	s, err := parseSource(b.Source)
	if err != nil {
		return nil, err
	}
	doc := &anthropic.DocumentBlockParam{}
	switch {
	case s.Type == "base64" && s.MediaType == "application/pdf":
		doc.Source.OfBase64 = &anthropic.Base64PDFSourceParam{Data: s.Data}
	case s.Type == "base64" && s.MediaType == "text/plain":
		text, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return nil, invalidf("document source: text/plain data is not base64: %v", err)
		}
		doc.Source.OfText = &anthropic.PlainTextSourceParam{Data: string(text)}
	case s.Type == "base64":
		return nil, invalidf("document source: media_type %q is not supported (application/pdf or text/plain)", s.MediaType)
	case s.Type == "text":
		if s.MediaType != "" && s.MediaType != "text/plain" {
			return nil, invalidf("document source: text media_type %q is not supported (text/plain)", s.MediaType)
		}
		doc.Source.OfText = &anthropic.PlainTextSourceParam{Data: s.Data}
	case s.Type == "url":
		if s.URL == "" {
			return nil, invalidf("document source: url is empty")
		}
		doc.Source.OfURL = &anthropic.URLPDFSourceParam{URL: s.URL}
	default:
		return nil, unsupportedSource("document", s)
	}
	if b.Title != "" {
		doc.Title = anthropic.String(b.Title)
	}
	if b.Context != "" {
		doc.Context = anthropic.String(b.Context)
	}
	return doc, nil
}

func unsupportedSource(what string, s source) error {
	if s.Type == "file" {
		return invalidf("%s source: file %q must be resolved to its content before a model call; the anthropic provider cannot send reins file ids", what, s.FileID)
	}
	return invalidf("%s source: type %q is not supported", what, s.Type)
}
