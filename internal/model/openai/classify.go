package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

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
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		f := classify.Failure{
			Status:  apiErr.StatusCode,
			Type:    apiErr.Type,
			Code:    apiErr.Code,
			Message: apiErr.Message,
			Header:  h,
		}
		return f.Error(err, p.now())
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return streamFailure(streamErr.Event.Data).Error(err, p.now())
	}
	return classify.Transport(ctx, err)
}

// streamFailure decodes an error chunk ({"error":{...}}) received in the
// middle of a stream. Compatible servers disagree on the shape of code: a
// string ("insufficient_quota") or an HTTP status (502); a numeric code is
// taken as the status.
func streamFailure(data []byte) classify.Failure {
	var chunk struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &chunk) != nil {
		return classify.Failure{Message: "malformed error event in the response stream"}
	}
	e := chunk.Error
	f := classify.Failure{Type: e.Type, Message: e.Message}
	var code string
	var status int
	switch {
	case json.Unmarshal(e.Code, &code) == nil:
		f.Code = code
		if n, err := strconv.Atoi(code); err == nil && n >= 400 && n < 600 {
			f.Status = n
		}
	case json.Unmarshal(e.Code, &status) == nil && status >= 400 && status < 600:
		f.Status = status
	}
	if f.Type == "" && f.Code == "" && f.Status == 0 && f.Message == "" {
		f.Message = "error event in the response stream"
	}
	return f
}
