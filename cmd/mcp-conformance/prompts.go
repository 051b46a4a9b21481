package main

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func user(c sdk.Content) *sdk.PromptMessage { return &sdk.PromptMessage{Role: "user", Content: c} }

func addPrompts(s *sdk.Server) {
	s.AddPrompt(&sdk.Prompt{Name: "test_simple_prompt", Description: "A prompt without arguments"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{Text: "This is a simple prompt for testing."})}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with arguments", Arguments: []*sdk.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true},
		{Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			a := r.Params.Arguments
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{user(&sdk.TextContent{
				Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt embedding a resource",
		Arguments: []*sdk.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			uri := r.Params.Arguments["resourceUri"]
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				user(&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
				user(&sdk.TextContent{Text: "Please process the embedded resource above."}),
			}}, nil
		})
	s.AddPrompt(&sdk.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
		func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				user(&sdk.ImageContent{Data: pngPixel, MIMEType: "image/png"}),
				user(&sdk.TextContent{Text: "Please analyze the image above."}),
			}}, nil
		})
}

// complete answers completion/complete with a fixed suggestion list.
func complete(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
	return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{"paris", "park", "party"}, Total: 3}}, nil
}
