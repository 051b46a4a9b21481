package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/internal/sinktest"
)

// FuzzStream feeds arbitrary response bodies through the SDK's event
// decoder and the accumulator: whatever arrives, Stream must not panic, a
// broken stream must be KindRequestFailed, and a complete response must
// agree with what the sink saw. The seed corpus is in testdata/fuzz.
func FuzzStream(f *testing.F) {
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		res := &http.Response{
			StatusCode: http.StatusOK,
			Header:     http.Header{"Content-Type": {"text/event-stream"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		}
		stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
		defer stream.Close()
		var sink sinktest.Recorder
		acc := newAccumulator(&sink, slog.New(slog.DiscardHandler))
		for stream.Next() {
			acc.add(stream.Current())
		}
		if stream.Err() != nil {
			return
		}
		resp, err := acc.response(context.Background())
		if err != nil {
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.KindRequestFailed {
				t.Fatalf("broken stream error = %v, want request_failed", err)
			}
			return
		}
		var texts []string
		for _, b := range resp.Content {
			switch b.Type {
			case model.BlockText:
				texts = append(texts, b.Text)
			case model.BlockToolUse:
				if !json.Valid(b.Input) {
					t.Fatalf("tool input %q is not JSON", b.Input)
				}
			default:
				t.Fatalf("unexpected block type %q", b.Type)
			}
		}
		seen := sink.Texts()
		for i, s := range seen {
			if i >= len(texts) || texts[i] != s {
				t.Fatalf("sink texts %q disagree with the response texts %q", seen, texts)
			}
		}
	})
}
