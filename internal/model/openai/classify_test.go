package openai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeopenai"
	"github.com/reinsdev/reins/internal/model"
)

func TestClassification(t *testing.T) {
	inFiveSeconds := time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		resp       fakeopenai.Response
		kind       model.Kind
		status     int
		retryAfter time.Duration
		approx     bool
	}{
		{name: "429 retry-after seconds", resp: fakeopenai.Failure(429, "requests", "Rate limit reached").WithCode("rate_limit_exceeded").WithHeader("retry-after", "3"), kind: model.KindRateLimited, status: 429, retryAfter: 3 * time.Second},
		{name: "429 retry-after-ms wins", resp: fakeopenai.Failure(429, "requests", "Rate limit reached").WithHeader("retry-after-ms", "250").WithHeader("retry-after", "3"), kind: model.KindRateLimited, status: 429, retryAfter: 250 * time.Millisecond},
		{name: "429 retry-after date", resp: fakeopenai.Failure(429, "requests", "Rate limit reached").WithHeader("retry-after", inFiveSeconds), kind: model.KindRateLimited, status: 429, retryAfter: 5 * time.Second, approx: true},
		{name: "429 insufficient_quota", resp: fakeopenai.Failure(429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.").WithCode("insufficient_quota"), kind: model.KindBilling, status: 429},
		{name: "402", resp: fakeopenai.Failure(402, "payment_required", "Insufficient credits"), kind: model.KindBilling, status: 402},
		{name: "500", resp: fakeopenai.Failure(500, "server_error", "The server had an error"), kind: model.KindRequestFailed, status: 500},
		{name: "503", resp: fakeopenai.Failure(503, "server_error", "overloaded"), kind: model.KindRequestFailed, status: 503},
		{name: "529", resp: fakeopenai.Failure(529, "overloaded_error", "Overloaded"), kind: model.KindOverloaded, status: 529},
		{name: "400", resp: fakeopenai.Failure(400, "invalid_request_error", "Invalid 'messages'").WithCode("invalid_value"), kind: model.KindInvalid, status: 400},
		{name: "401", resp: fakeopenai.Failure(401, "invalid_request_error", "Incorrect API key provided").WithCode("invalid_api_key"), kind: model.KindInvalid, status: 401},
		{name: "403", resp: fakeopenai.Failure(403, "invalid_request_error", "Country not supported").WithCode("unsupported_country_region_territory"), kind: model.KindInvalid, status: 403},
		{name: "404", resp: fakeopenai.Failure(404, "invalid_request_error", "The model `gpt-nope` does not exist").WithCode("model_not_found"), kind: model.KindInvalid, status: 404},
		{name: "error chunk server_error", resp: fakeopenai.Text("partial").ThenError("server_error", "stream failed"), kind: model.KindRequestFailed},
		{name: "error chunk numeric 502", resp: fakeopenai.Text("partial").ThenError("", "upstream failed").WithCode(502), kind: model.KindRequestFailed, status: 502},
		{name: "error chunk numeric 429", resp: fakeopenai.Text("partial").ThenError("", "upstream rate limit").WithCode(429), kind: model.KindRateLimited, status: 429},
		{name: "error chunk insufficient_quota", resp: fakeopenai.Text("partial").ThenError("insufficient_quota", "quota").WithCode("insufficient_quota"), kind: model.KindBilling},
		{name: "error chunk overloaded", resp: fakeopenai.Text("partial").ThenError("overloaded_error", "Overloaded"), kind: model.KindOverloaded},
		{name: "mid-stream disconnect", resp: fakeopenai.Text("half of it").ThenDisconnect(), kind: model.KindRequestFailed},
		{name: "no finish_reason", resp: fakeopenai.Text("all of it").WithoutFinish(), kind: model.KindRequestFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newProvider(t)
			srv.Push(tt.resp)
			resp, err := p.Stream(context.Background(), userText("hi"), nil)
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			var me *model.Error
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T), want *model.Error", err, err)
			}
			if me.Kind != tt.kind {
				t.Errorf("kind = %v, want %v (%v)", me.Kind, tt.kind, me)
			}
			if me.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", me.StatusCode, tt.status)
			}
			if tt.approx {
				if me.RetryAfter <= tt.retryAfter-2*time.Second || me.RetryAfter > tt.retryAfter {
					t.Errorf("retry after = %v, want about %v", me.RetryAfter, tt.retryAfter)
				}
			} else if me.RetryAfter != tt.retryAfter {
				t.Errorf("retry after = %v, want %v", me.RetryAfter, tt.retryAfter)
			}
			if me.Message == "" {
				t.Error("empty message")
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (the SDK must not retry)", n)
			}
		})
	}
}
