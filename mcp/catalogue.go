package mcp

import (
	"context"
	"encoding/json"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Definition is one operation as exported by [Server.Catalogue].
type Definition struct {
	Name         string               `json:"name"`
	Group        string               `json:"group,omitempty"`
	Title        string               `json:"title,omitempty"`
	Description  string               `json:"description,omitempty"`
	InputSchema  json.RawMessage      `json:"inputSchema"`
	OutputSchema json.RawMessage      `json:"outputSchema,omitempty"`
	Annotations  *sdk.ToolAnnotations `json:"annotations,omitempty"`
}

// Catalogue returns the operations caller may see, ordered by name,
// whatever the server's mode.
func (s *Server) Catalogue(ctx context.Context, caller string) []Definition {
	out := []Definition{}
	for _, e := range s.reg.sorted() {
		if _, ok := s.visible(ctx, caller, e.op.Name); !ok {
			continue
		}
		out = append(out, Definition{Name: e.op.Name, Group: e.op.Group, Title: e.op.Title,
			Description: e.op.Description, InputSchema: e.inRaw, OutputSchema: e.op.OutputSchema,
			Annotations: e.op.Annotations.sdk(e.op.Title)})
	}
	return out
}
