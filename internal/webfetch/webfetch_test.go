package webfetch

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/sandbox/egress"
)

func TestFetcher(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain words") })
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G'})
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no such page", http.StatusNotFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:1/elsewhere", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	f := &Fetcher{Transport: http.DefaultTransport, MaxRedirects: 3,
		Policy: func(context.Context, *ma.Session) (egress.Policy, error) {
			return egress.Policy{AllowedHosts: []string{"127.0.0.1"}}, nil
		}}
	run := func(url string) tool.Result {
		in, _ := json.Marshal(map[string]string{"url": url})
		return f.RunTool(context.Background(), &ma.Session{}, tool.Call{Name: "web_fetch", Input: in})
	}
	for _, c := range []struct {
		url    string
		isErr  bool
		substr string
	}{
		{srv.URL + "/text", false, "plain words"},
		{srv.URL + "/image", true, "image/png, not text"},
		{srv.URL + "/missing", true, "404 Not Found"},
		{srv.URL + "/loop", true, "more than 3 redirects"},
		{srv.URL + "/away", true, "redirect to host localhost: not permitted"},
		{"http://localhost:1/", true, "does not allow host localhost"},
		{"ftp://127.0.0.1/", true, "only http and https"},
		{"", true, "the input must be"},
	} {
		res := run(c.url)
		text := res.Content[0].Text
		if res.IsError != c.isErr || !strings.Contains(text, c.substr) {
			t.Errorf("%s: error %v, %q; want error %v containing %q", c.url, res.IsError, text, c.isErr, c.substr)
		}
	}
}
