package main

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func addResources(s *sdk.Server) {
	s.AddResource(&sdk.Resource{Name: "static-text", URI: "test://static-text", MIMEType: "text/plain", Description: "A static text resource"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return contents(&sdk.ResourceContents{URI: r.Params.URI, MIMEType: "text/plain", Text: "This is the content of the static text resource."}), nil
		})
	s.AddResource(&sdk.Resource{Name: "static-binary", URI: "test://static-binary", MIMEType: "image/png", Description: "A static binary resource"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return contents(&sdk.ResourceContents{URI: r.Params.URI, MIMEType: "image/png", Blob: pngPixel}), nil
		})
	s.AddResource(&sdk.Resource{Name: "watched-resource", URI: "test://watched-resource", MIMEType: "text/plain", Description: "A resource to subscribe to"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return contents(&sdk.ResourceContents{URI: r.Params.URI, MIMEType: "text/plain", Text: "Watched resource content"}), nil
		})
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "template", URITemplate: "test://template/{id}/data", MIMEType: "application/json",
		Description: "A parameterised resource"},
		func(_ context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(r.Params.URI, "test://template/"), "/data")
			return contents(&sdk.ResourceContents{URI: r.Params.URI, MIMEType: "application/json",
				Text: fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id)}), nil
		})
}

func contents(c *sdk.ResourceContents) *sdk.ReadResourceResult {
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}
}
