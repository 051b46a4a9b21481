package openai

import (
	"encoding/base64"
	"encoding/json"

	"github.com/openai/openai-go/v3"

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

// contentPart maps a text, image or document block onto a user content
// part. Images become image_url parts (base64 as a data: URL); base64 PDFs
// become file parts; plain-text documents become text parts. PDF URLs and
// file ids have no Chat Completions form and are KindInvalid.
func contentPart(b model.Block) (openai.ChatCompletionContentPartUnionParam, error) {
	switch b.Type {
	case model.BlockText:
		return openai.TextContentPart(b.Text), nil
	case model.BlockImage:
		s, err := parseSource(b.Source)
		if err != nil {
			return openai.ChatCompletionContentPartUnionParam{}, err
		}
		var url string
		switch s.Type {
		case "base64":
			if s.MediaType == "" || s.Data == "" {
				return openai.ChatCompletionContentPartUnionParam{}, invalidf("image source: base64 needs media_type and data")
			}
			url = "data:" + s.MediaType + ";base64," + s.Data
		case "url":
			if s.URL == "" {
				return openai.ChatCompletionContentPartUnionParam{}, invalidf("image source: url is empty")
			}
			url = s.URL
		default:
			return openai.ChatCompletionContentPartUnionParam{}, unsupportedSource("image", s)
		}
		return openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}), nil
	case model.BlockDocument:
		return documentPart(b)
	}
	return openai.ChatCompletionContentPartUnionParam{}, invalidf("unsupported content block type %q", b.Type)
}

func documentPart(b model.Block) (openai.ChatCompletionContentPartUnionParam, error) {
	s, err := parseSource(b.Source)
	if err != nil {
		return openai.ChatCompletionContentPartUnionParam{}, err
	}
	switch {
	case s.Type == "base64" && s.MediaType == "application/pdf":
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		return openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{
			FileData: openai.String("data:application/pdf;base64," + s.Data),
			Filename: openai.String(name),
		}), nil
	case s.Type == "base64" && s.MediaType == "text/plain":
		text, err := base64.StdEncoding.DecodeString(s.Data)
		if err != nil {
			return openai.ChatCompletionContentPartUnionParam{}, invalidf("document source: text/plain data is not base64: %v", err)
		}
		return openai.TextContentPart(documentText(b, string(text))), nil
	case s.Type == "text":
		return openai.TextContentPart(documentText(b, s.Data)), nil
	case s.Type == "base64":
		return openai.ChatCompletionContentPartUnionParam{}, invalidf("document source: media_type %q is not supported (application/pdf or text/plain)", s.MediaType)
	case s.Type == "url":
		return openai.ChatCompletionContentPartUnionParam{}, invalidf("document source: url documents are not supported by the openai provider")
	}
	return openai.ChatCompletionContentPartUnionParam{}, unsupportedSource("document", s)
}

// documentText renders a plain-text document with its title and context.
func documentText(b model.Block, text string) string {
	head := ""
	if b.Title != "" {
		head += "Document: " + b.Title + "\n"
	}
	if b.Context != "" {
		head += "Context: " + b.Context + "\n"
	}
	if head == "" {
		return text
	}
	return head + "\n" + text
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

func unsupportedSource(what string, s source) error {
	if s.Type == "file" {
		return invalidf("%s source: file %q must be resolved to its content before a model call; the openai provider cannot send reins file ids", what, s.FileID)
	}
	return invalidf("%s source: type %q is not supported", what, s.Type)
}
