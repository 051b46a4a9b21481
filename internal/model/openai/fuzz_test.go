package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/idle"
	"github.com/reinsdev/reins/internal/model/internal/sinktest"
)

// FuzzStream feeds arbitrary response bodies through the SDK's chunk
// decoder, the accumulator and the classification of error chunks: whatever
// arrives, nothing panics, every failure is a *model.Error, and a complete
// response agrees with what the sink saw. The seed corpus is in
// testdata/fuzz.
func FuzzStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\",\"code\":502}}\n\n"))
	p := &Provider{log: slog.New(slog.DiscardHandler), now: time.Now}
	f.Fuzz(func(t *testing.T, body []byte) {
		res := &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"text/event-stream"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		stream := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
		defer stream.Close()
		var sink sinktest.Recorder
		acc := newAccumulator(&sink, p.log)
		for stream.Next() {
			acc.add(stream.Current())
		}
		var me *model.Error
		if err := stream.Err(); err != nil {
			wd := idle.Start(context.Background(), 0)
			defer wd.Stop()
			if cerr := p.classify(context.Background(), wd, err); !errors.As(cerr, &me) {
				t.Fatalf("classify(%v) = %v, want a *model.Error", err, cerr)
			}
			return
		}
		resp, err := acc.response(context.Background())
		if err != nil {
			if !errors.As(err, &me) || me.Kind != model.KindRequestFailed {
				t.Fatalf("broken stream error = %v, want request_failed", err)
			}
			return
		}
		text := ""
		for i, b := range resp.Content {
			switch {
			case b.Type == model.BlockText && i == 0:
				text = b.Text
			case b.Type == model.BlockToolUse:
				if !json.Valid(b.Input) {
					t.Fatalf("tool input %q is not JSON", b.Input)
				}
			default:
				t.Fatalf("unexpected block %d of type %q", i, b.Type)
			}
		}
		seen := sink.Texts()
		if len(seen) > 1 || (len(seen) == 1 && seen[0] != text) {
			t.Fatalf("sink texts %q disagree with the response text %q", seen, text)
		}
	})
}

// FuzzStreamFailure decodes arbitrary error chunks.
func FuzzStreamFailure(f *testing.F) {
	f.Add([]byte(`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`))
	f.Add([]byte(`{"error":{"message":"upstream","code":429}}`))
	f.Add([]byte(`{"error":"plain string"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		me := streamFailure(data).Error(nil, time.Now())
		if me.Message == "" {
			t.Fatalf("empty message for %q", data)
		}
		if me.StatusCode != 0 && (me.StatusCode < 400 || me.StatusCode >= 600) {
			t.Fatalf("status %d from %q", me.StatusCode, data)
		}
	})
}
