package gateway

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/reinsdev/reins/internal/model"
)

// wire is a provider API's format, as the gateway needs it.
type wire interface {
	// provider names the model.Router provider; path is the call's path
	// relative to its base URL.
	provider() string
	path() string
	// forwardHeader picks the client's headers that go upstream.
	forwardHeader(http.Header) http.Header
	// askUsage rewrites a streamed request's body so that the stream
	// reports usage; strip says that the client did not ask for it and
	// must not see it.
	askUsage(body []byte) (_ []byte, strip bool, _ error)
	// usage reads a JSON response's usage.
	usage(body []byte) model.Usage
	// streamEvent reads one event into st and reports whether the client
	// gets it.
	streamEvent(ev event, st *streamState, strip bool) bool
	writeError(w http.ResponseWriter, status int, errType, msg string)
}

// anthropicWire is the Messages API.
type anthropicWire struct{}

func (anthropicWire) provider() string { return "anthropic" }
func (anthropicWire) path() string     { return "v1/messages" }

func (anthropicWire) forwardHeader(h http.Header) http.Header {
	out := http.Header{}
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

func (anthropicWire) askUsage(body []byte) ([]byte, bool, error) { return body, false, nil }

// anthropicUsage is the usage object of the Messages API.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// merge takes the counts u reports: message_delta's usage is cumulative
// and may leave the input counts out.
func (u *anthropicUsage) merge(into *model.Usage) {
	if u == nil {
		return
	}
	into.OutputTokens = u.OutputTokens
	into.InputTokens = cmp.Or(u.InputTokens, into.InputTokens)
	into.CacheCreationInputTokens = cmp.Or(u.CacheCreationInputTokens, into.CacheCreationInputTokens)
	into.CacheReadInputTokens = cmp.Or(u.CacheReadInputTokens, into.CacheReadInputTokens)
}

func (anthropicWire) usage(body []byte) model.Usage {
	var m struct {
		Usage *anthropicUsage `json:"usage"`
	}
	var u model.Usage
	if json.Unmarshal(body, &m) == nil {
		m.Usage.merge(&u)
	}
	return u
}

func (anthropicWire) streamEvent(ev event, st *streamState, _ bool) bool {
	var m struct {
		Type    string `json:"type"`
		Message *struct {
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsage `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(ev.data, &m) != nil {
		return true
	}
	switch m.Type {
	case "message_start":
		if m.Message != nil {
			m.Message.Usage.merge(&st.usage)
		}
	case "message_delta":
		m.Usage.merge(&st.usage)
	case "message_stop":
		st.done = true
	case "error":
		st.err = errors.New("the stream reported an error")
		if m.Error != nil {
			st.err = fmt.Errorf("the stream reported %s: %s", m.Error.Type, m.Error.Message)
		}
	}
	return true
}

func (anthropicWire) writeError(w http.ResponseWriter, status int, errType, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": errType, "message": msg}})
}

// openaiWire is the Chat Completions API.
type openaiWire struct{}

func (openaiWire) provider() string                      { return "openai" }
func (openaiWire) path() string                          { return "chat/completions" }
func (openaiWire) forwardHeader(http.Header) http.Header { return http.Header{} }

func (openaiWire) askUsage(body []byte) ([]byte, bool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false, fmt.Errorf("the request body is not a JSON object: %w", err)
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, false, fmt.Errorf("stream_options: %w", err)
		}
	}
	var include bool
	if raw, ok := opts["include_usage"]; ok {
		_ = json.Unmarshal(raw, &include)
	}
	if include {
		return body, false, nil
	}
	opts["include_usage"] = json.RawMessage("true")
	var err error
	if m["stream_options"], err = json.Marshal(opts); err != nil {
		return nil, false, err
	}
	body, err = json.Marshal(m)
	return body, true, err
}

// openaiUsage is the usage object of Chat Completions.
type openaiUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// model counts as the openai provider does: cached prompt tokens are
// cache reads, apart from the input tokens.
func (u *openaiUsage) model() model.Usage {
	if u == nil {
		return model.Usage{}
	}
	cached := u.PromptTokensDetails.CachedTokens
	return model.Usage{InputTokens: max(u.PromptTokens-cached, 0), OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
}

func (openaiWire) usage(body []byte) model.Usage {
	var m struct {
		Usage *openaiUsage `json:"usage"`
	}
	_ = json.Unmarshal(body, &m)
	return m.Usage.model()
}

func (openaiWire) streamEvent(ev event, st *streamState, strip bool) bool {
	if string(ev.data) == "[DONE]" {
		st.done = true
		return true
	}
	var m struct {
		Usage   *openaiUsage      `json:"usage"`
		Choices []json.RawMessage `json:"choices"`
		Error   *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(ev.data, &m) != nil {
		return true
	}
	if m.Error != nil {
		st.err = fmt.Errorf("the stream reported %s: %s", m.Error.Type, m.Error.Message)
	}
	if m.Usage != nil {
		st.usage = m.Usage.model()
		return !strip || len(m.Choices) > 0
	}
	return true
}

func (openaiWire) writeError(w http.ResponseWriter, status int, errType, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": errType, "param": nil, "code": nil}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
