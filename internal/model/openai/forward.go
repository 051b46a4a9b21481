package openai

import (
	"context"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/reinsdev/reins/internal/model"
)

var _ model.Upstream = (*Provider)(nil)

// Forward implements model.Upstream: body goes to the Chat Completions
// endpoint as it is, through the provider's options (its base URL,
// credentials and HTTP client), without retries: the caller owns them.
func (p *Provider) Forward(ctx context.Context, path string, header http.Header, body []byte) (*http.Response, error) {
	c := openai.Client{Options: p.completions.Options}
	opts := []option.RequestOption{option.WithRequestBody("application/json", body)}
	for k, vs := range header {
		opts = append(opts, option.WithHeader(k, strings.Join(vs, ",")))
	}
	var res *http.Response
	err := c.Post(ctx, path, nil, &res, opts...)
	return model.Forwarded("openai", res, err)
}
