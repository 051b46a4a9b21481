package anthropic

import (
	"context"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/model/internal/classify"
	"github.com/reinsdev/reins/internal/model/internal/idle"
)

// classify turns an error of the SDK into a *model.Error, or into a wrapped
// ctx.Err() when the caller abandoned the call. wd tells whether the call
// was cancelled for silence.
func (p *Provider) classify(ctx context.Context, wd *idle.Watchdog, err error) error {
	if ctx.Err() != nil {
		return classify.Transport(ctx, err)
	}
	if stalled := wd.Stalled(); stalled != nil {
		return classify.Stalled(stalled)
	}
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		// Connection failures, timeouts, a cut or undecodable stream.
		return classify.Transport(ctx, err)
	}
	var h http.Header
	if apiErr.Response != nil {
		h = apiErr.Response.Header
	}
	f := classify.Failure{
		Status:  apiErr.StatusCode,
		Type:    string(apiErr.Type()),
		Code:    string(apiErr.ErrorCode()),
		Message: apiErr.Message,
		Header:  h,
	}
	return f.Error(err, p.now())
}
