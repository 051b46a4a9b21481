package anthropic

import (
	"context"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/reinsdev/reins/internal/model"
)

var _ model.Upstream = (*Provider)(nil)

// Forward implements model.Upstream: body goes to the Messages API as it
// is, through the provider's client (its base URL, credentials and HTTP
// client), without retries: the caller owns them.
func (p *Provider) Forward(ctx context.Context, path string, header http.Header, body []byte) (*http.Response, error) {
	opts := []option.RequestOption{option.WithRequestBody("application/json", body)}
	for k, vs := range header {
		opts = append(opts, option.WithHeader(k, strings.Join(vs, ",")))
	}
	var res *http.Response
	err := p.client.Post(ctx, path, nil, &res, opts...)
	return model.Forwarded("anthropic", res, err)
}
