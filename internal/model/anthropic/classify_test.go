package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/fakeanthropic"
	"github.com/reinsdev/reins/internal/model"
)

func TestClassification(t *testing.T) {
	inFiveSeconds := time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		resp       fakeanthropic.Response
		kind       model.Kind
		status     int
		retryAfter time.Duration // exact unless retryApprox
		approx     bool
	}{
		{name: "529 overloaded", resp: fakeanthropic.Failure(529, "overloaded_error", "Overloaded"), kind: model.KindOverloaded, status: 529},
		{name: "overloaded mid-stream", resp: fakeanthropic.Text("partial answer").ThenError("overloaded_error", "Overloaded"), kind: model.KindOverloaded},
		{name: "429 retry-after seconds", resp: fakeanthropic.Failure(429, "rate_limit_error", "slow down").WithHeader("retry-after", "7"), kind: model.KindRateLimited, status: 429, retryAfter: 7 * time.Second},
		{name: "429 retry-after-ms wins", resp: fakeanthropic.Failure(429, "rate_limit_error", "slow down").WithHeader("retry-after-ms", "1500").WithHeader("retry-after", "7"), kind: model.KindRateLimited, status: 429, retryAfter: 1500 * time.Millisecond},
		{name: "429 retry-after date", resp: fakeanthropic.Failure(429, "rate_limit_error", "slow down").WithHeader("retry-after", inFiveSeconds), kind: model.KindRateLimited, status: 429, retryAfter: 5 * time.Second, approx: true},
		{name: "429 without retry-after", resp: fakeanthropic.Failure(429, "rate_limit_error", "slow down"), kind: model.KindRateLimited, status: 429},
		{name: "500", resp: fakeanthropic.Failure(500, "api_error", "Internal server error"), kind: model.KindRequestFailed, status: 500},
		{name: "502 not JSON", resp: fakeanthropic.Failure(502, "", ""), kind: model.KindRequestFailed, status: 502},
		{name: "503", resp: fakeanthropic.Failure(503, "api_error", "unavailable"), kind: model.KindRequestFailed, status: 503},
		{name: "api_error mid-stream", resp: fakeanthropic.Text("x").ThenError("api_error", "boom"), kind: model.KindRequestFailed},
		{name: "400", resp: fakeanthropic.Failure(400, "invalid_request_error", "messages: bad"), kind: model.KindInvalid, status: 400},
		{name: "401", resp: fakeanthropic.Failure(401, "authentication_error", "invalid x-api-key"), kind: model.KindInvalid, status: 401},
		{name: "403", resp: fakeanthropic.Failure(403, "permission_error", "no access"), kind: model.KindInvalid, status: 403},
		{name: "404", resp: fakeanthropic.Failure(404, "not_found_error", "model: claude-nope"), kind: model.KindInvalid, status: 404},
		{name: "413", resp: fakeanthropic.Failure(413, "request_too_large", "too large"), kind: model.KindInvalid, status: 413},
		{name: "402", resp: fakeanthropic.Failure(402, "billing_error", "payment required"), kind: model.KindBilling, status: 402},
		{name: "400 credit balance", resp: fakeanthropic.Failure(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."), kind: model.KindBilling, status: 400},
		{name: "429 spend limit", resp: fakeanthropic.Failure(429, "rate_limit_error", "You have reached your specified workspace API spend limit."), kind: model.KindBilling, status: 429},
		{name: "mid-stream disconnect", resp: fakeanthropic.Text("half of it").ThenDisconnect(), kind: model.KindRequestFailed},
		{name: "no message_stop", resp: fakeanthropic.Text("all of it").WithoutMessageStop(), kind: model.KindRequestFailed},
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
			if tt.kind.Retryable() != me.Kind.Retryable() {
				t.Errorf("retryable = %v", me.Kind.Retryable())
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests, want 1 (the SDK must not retry)", n)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := fakeanthropic.New(t)
	url := srv.URL
	srv.Close()
	p := newProviderAt(url)
	_, err := p.Stream(context.Background(), userText("hi"), nil)
	var me *model.Error
	if !errors.As(err, &me) || me.Kind != model.KindRequestFailed {
		t.Fatalf("err = %v, want request_failed", err)
	}
}

func TestMessageIsTheAPIMessage(t *testing.T) {
	p, srv := newProvider(t)
	srv.Push(fakeanthropic.Failure(404, "not_found_error", "model: claude-nope"))
	_, err := p.Stream(context.Background(), userText("hi"), nil)
	if me := model.AsError(err); me.Message != "model: claude-nope" {
		t.Errorf("message = %q", me.Message)
	}
}
