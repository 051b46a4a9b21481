package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
)

// Servers and proxies in front of them answer errors that are not JSON.
func TestPlainTextErrors(t *testing.T) {
	for status, want := range map[int]model.Kind{
		404: model.KindInvalid, 401: model.KindInvalid, 502: model.KindRequestFailed, 429: model.KindRateLimited, 402: model.KindBilling,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>nope</html>", status)
		}))
		p := anthropic.New(anthropic.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
		_, err := p.Stream(context.Background(), userText("hi"), nil)
		me := model.AsError(err)
		if me.Kind != want || me.StatusCode != status {
			t.Errorf("%d: err = %v (kind %v, status %d), want %v", status, err, me.Kind, me.StatusCode, want)
		}
		srv.Close()
	}
}
