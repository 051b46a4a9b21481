package classify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", header("retry-after", "12"), 12 * time.Second},
		{"fractional seconds", header("retry-after", "1.5"), 1500 * time.Millisecond},
		{"milliseconds", header("retry-after-ms", "250"), 250 * time.Millisecond},
		{"milliseconds win", header("retry-after-ms", "250", "retry-after", "12"), 250 * time.Millisecond},
		{"bad milliseconds fall back", header("retry-after-ms", "soon", "retry-after", "12"), 12 * time.Second},
		{"http date", header("retry-after", now.Add(30*time.Second).Format(http.TimeFormat)), 30 * time.Second},
		{"past date", header("retry-after", now.Add(-time.Minute).Format(http.TimeFormat)), 0},
		{"negative", header("retry-after", "-3"), 0},
		{"zero", header("retry-after", "0"), 0},
		{"garbage", header("retry-after", "tomorrow"), 0},
		{"NaN", header("retry-after", "NaN"), 0},
		{"too far", header("retry-after", "86400"), 0},
	}
	for _, tt := range tests {
		if got := RetryAfter(tt.h, now); got != tt.want {
			t.Errorf("%s: RetryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestFailureKind(t *testing.T) {
	tests := []struct {
		f    Failure
		want model.Kind
	}{
		{Failure{Status: 529}, model.KindOverloaded},
		{Failure{Status: 200, Type: "overloaded_error"}, model.KindOverloaded},
		{Failure{Status: 429}, model.KindRateLimited},
		{Failure{Type: "rate_limit_error"}, model.KindRateLimited},
		{Failure{Status: 429, Code: "insufficient_quota"}, model.KindBilling},
		{Failure{Status: 429, Type: "insufficient_quota"}, model.KindBilling},
		{Failure{Status: 429, Message: "You have reached your specified API spend limit"}, model.KindBilling},
		{Failure{Status: 400, Message: "Your credit balance is too low"}, model.KindBilling},
		{Failure{Status: 402}, model.KindBilling},
		{Failure{Status: 403, Type: "billing_error"}, model.KindBilling},
		{Failure{Status: 500}, model.KindRequestFailed},
		{Failure{Status: 504}, model.KindRequestFailed},
		{Failure{Status: 408}, model.KindRequestFailed},
		{Failure{Status: 409}, model.KindRequestFailed},
		{Failure{Status: 400}, model.KindInvalid},
		{Failure{Status: 401}, model.KindInvalid},
		{Failure{Status: 403}, model.KindInvalid},
		{Failure{Status: 404}, model.KindInvalid},
		{Failure{Status: 422}, model.KindInvalid},
		{Failure{Status: 200, Type: "invalid_request_error"}, model.KindInvalid},
		{Failure{Status: 200, Type: "api_error"}, model.KindRequestFailed},
		{Failure{}, model.KindRequestFailed},
	}
	for _, tt := range tests {
		if got := tt.f.kind(); got != tt.want {
			t.Errorf("%+v: kind = %v, want %v", tt.f, got, tt.want)
		}
	}
}

func TestFailureError(t *testing.T) {
	cause := errors.New("sdk error")
	me := Failure{Status: 429, Type: "rate_limit_error", Message: "slow down", Header: header("retry-after", "2")}.Error(cause, now)
	if me.Kind != model.KindRateLimited || me.StatusCode != 429 || me.RetryAfter != 2*time.Second || me.Message != "slow down" || !errors.Is(me, cause) {
		t.Errorf("error = %+v", me)
	}
	me = Failure{Status: 400, Header: header("retry-after", "2")}.Error(cause, now)
	if me.RetryAfter != 0 {
		t.Errorf("retry after on a non-retryable error: %v", me.RetryAfter)
	}
	if me.Message != "bad request" {
		t.Errorf("message = %q", me.Message)
	}
	if me = (Failure{Status: 200, Type: "api_error"}).Error(cause, now); me.StatusCode != 0 || me.Message != "api_error" {
		t.Errorf("mid-stream error = %+v", me)
	}
}

func TestTransport(t *testing.T) {
	err := Transport(context.Background(), io.ErrUnexpectedEOF)
	var me *model.Error
	if !errors.As(err, &me) || me.Kind != model.KindRequestFailed || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Transport = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Transport(ctx, io.ErrUnexpectedEOF)
	if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
		t.Errorf("Transport after cancel = %v, want a wrapped context.Canceled only", err)
	}
	if err := BrokenStream(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("BrokenStream after cancel = %v", err)
	}
	if err := BrokenStream(context.Background(), "x"); !errors.As(err, &me) || me.Kind != model.KindRequestFailed {
		t.Errorf("BrokenStream = %v", err)
	}
}

func FuzzRetryAfter(f *testing.F) {
	f.Add("", "12")
	f.Add("250", "")
	f.Add("", "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("1e400", "-1")
	f.Fuzz(func(t *testing.T, ms, s string) {
		h := http.Header{}
		h.Set("retry-after-ms", ms)
		h.Set("retry-after", s)
		d := RetryAfter(h, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("RetryAfter(%q, %q) = %v, out of [0, %v]", ms, s, d, maxRetryAfter)
		}
	})
}
