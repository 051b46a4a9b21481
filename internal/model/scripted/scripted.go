// Package scripted is an offline, deterministic model provider. It needs no
// network and no key, so reins runs fully offline (demos, tests, CI).
//
// The model reads directives from the latest user text block in the
// transcript;
// a text without directives is echoed back. Directives are lines starting
// with "@":
//
//	@text Hello there          reply with a text block (one per line)
//	@tool get_weather {"city":"Paris"}
//	                           call a tool (several lines: parallel calls)
//	@then Done: the weather is fine
//	                           the text to answer once the tool results are in
//	                           (default: a summary of the results)
//	@think                     report (hidden) reasoning before answering
//	@redacted                  add a redacted block (content withheld by
//	                           policy) after the texts
//	@sleep 2s                  wait before answering (honours cancellation)
//	@pace 20ms                 wait this long between streamed words
//	@refuse cyber Why not      refuse (stop reason refusal) with a policy
//	                           category ("-" for none) and an explanation
//	@fail overloaded 2         fail the first 2 attempts of this model call
//	                           (overloaded, rate_limited, server, invalid,
//	                           billing, auth; no count = every attempt)
//
// The requests of an outcome's grader are answered from directives in
// the rubric (see grade).
// A coordinator's model reads the answers of its threads as user text
// starting "Message from thread " (harness.ThreadMessagePrefix): when the
// latest user text is one, the scripted model answers "Collected
// replies:" and, a line each, every thread answer it read since the
// latest other user text, in their order. A child thread's task is its
// user text: its directives drive the child.
//
// A named model "scripted/<name>" reads its directives from the file
// <Dir>/<name>.txt instead: blocks separated by lines of "---", one block per
// model call of a turn, the last one repeating.
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/model"
)

// Provider is the scripted model. The zero value is ready to use.
type Provider struct {
	// Dir holds the named scripts ("<name>.txt"); empty disables them.
	Dir string

	mu       sync.Mutex     // guards attempts
	attempts map[string]int // per model call, for @fail counts
}

type plan struct {
	texts     []string
	tools     []model.Block
	then      string
	think     bool
	sleep     time.Duration
	pace      time.Duration
	fail      string
	failTimes int // 0 = always
	refusal   *model.Refusal
	redacted  bool
}

// Stream implements model.Provider.
func (p *Provider) Stream(ctx context.Context, req *model.Request, sink model.Sink) (*model.Response, error) {
	if req.Purpose == model.PurposeGrader {
		return p.grade(ctx, req)
	}
	directives, afterTools, err := p.directives(req)
	if err != nil {
		return nil, err
	}
	pl, err := parse(directives)
	if err != nil {
		return nil, &model.Error{Kind: model.KindInvalid, StatusCode: http.StatusBadRequest, Message: err.Error()}
	}
	// @sleep first, then @fail: a slow failure is a failure too.
	if err := wait(ctx, pl.sleep); err != nil {
		return nil, err
	}
	if pl.fail != "" {
		key := fmt.Sprintf("%s/%d", req.SessionID, len(req.Messages))
		p.mu.Lock()
		if p.attempts == nil {
			p.attempts = make(map[string]int)
		}
		p.attempts[key]++
		n := p.attempts[key]
		p.mu.Unlock()
		if pl.failTimes == 0 || n <= pl.failTimes {
			return nil, failure(pl.fail, n)
		}
	}
	resp := &model.Response{StopReason: model.StopEndTurn}
	if pl.think {
		sink.Thinking()
		resp.Thinking = true
	}
	texts := pl.texts
	tools := pl.tools
	if replies, ok := threadReplies(req.Messages); ok {
		texts, tools = []string{replies}, nil
	} else if afterTools != nil {
		tools = nil
		if pl.then != "" {
			texts = []string{pl.then}
		} else {
			texts = []string{summarize(afterTools)}
		}
	}
	for i, text := range texts {
		// Stream word by word so previews have something to show.
		for _, chunk := range chunks(text) {
			if err := wait(ctx, pl.pace); err != nil {
				return nil, err
			}
			sink.TextDelta(i, chunk)
		}
		resp.Content = append(resp.Content, model.Block{Type: model.BlockText, Text: text})
	}
	if pl.redacted && afterTools == nil {
		resp.Content = append(resp.Content, model.Block{Type: model.BlockRedacted})
	}
	for i, t := range tools {
		t.ID = fmt.Sprintf("toolu_scripted_%d_%d", len(req.Messages), i)
		resp.Content = append(resp.Content, t)
		resp.StopReason = model.StopToolUse
	}
	if pl.refusal != nil && afterTools == nil {
		resp.StopReason, resp.Refusal = model.StopRefusal, pl.refusal
	}
	resp.Usage = model.Usage{InputTokens: int64(tokens(req)), OutputTokens: int64(outTokens(resp))}
	return resp, nil
}

// directives finds the text that drives this call. afterTools is non-nil
// when the transcript ends with tool results: the directives then come from
// the user text that asked for the tools.
func (p *Provider) directives(req *model.Request) (string, []model.Block, error) {
	var afterTools []model.Block
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleUser {
		for _, b := range req.Messages[n-1].Content {
			if b.Type == model.BlockToolResult {
				afterTools = append(afterTools, b)
			}
		}
	}
	if name, ok := strings.CutPrefix(req.Model, "scripted/"); ok {
		text, err := p.named(name, req)
		return text, nil, err
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != model.RoleUser {
			continue
		}
		// The latest text block: consecutive user messages (for example
		// after an interrupted turn) are merged into one message.
		for j := len(m.Content) - 1; j >= 0; j-- {
			if b := m.Content[j]; b.Type == model.BlockText {
				return b.Text, afterTools, nil
			}
		}
	}
	return "", afterTools, nil
}

// named returns the block of a named script for this call of the turn.
func (p *Provider) named(name string, req *model.Request) (string, error) {
	if p.Dir == "" || name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", &model.Error{Kind: model.KindInvalid, StatusCode: http.StatusNotFound, Message: fmt.Sprintf("scripted model %q not found", req.Model)}
	}
	data, err := os.ReadFile(filepath.Join(p.Dir, name+".txt"))
	if err != nil {
		return "", &model.Error{Kind: model.KindInvalid, StatusCode: http.StatusNotFound, Message: fmt.Sprintf("scripted model %q: %v", req.Model, err), Err: err}
	}
	blocks := strings.Split(string(data), "\n---\n")
	// The call index within the turn: assistant messages since the last
	// user text.
	call := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == model.RoleAssistant {
			call++
			continue
		}
		if hasText(m) {
			break
		}
	}
	if call >= len(blocks) {
		call = len(blocks) - 1
	}
	return blocks[call], nil
}

// threadMessagePrefix starts a thread's answer in a coordinator's
// transcript (harness.ThreadMessagePrefix).
const threadMessagePrefix = "Message from thread "

// threadReplies returns the answer to a transcript whose latest user text
// is a thread's answer: the answers since the latest other user text.
func threadReplies(msgs []model.Message) (string, bool) {
	var replies []string
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != model.RoleUser {
			continue
		}
		for j := len(msgs[i].Content) - 1; j >= 0; j-- {
			b := msgs[i].Content[j]
			if b.Type != model.BlockText {
				continue
			}
			if !strings.HasPrefix(b.Text, threadMessagePrefix) {
				i = -1
				break
			}
			_, body, _ := strings.Cut(b.Text, "\n")
			replies = append(replies, body)
		}
	}
	if len(replies) == 0 {
		return "", false
	}
	slices.Reverse(replies)
	return "Collected replies:\n- " + strings.Join(replies, "\n- "), true
}

func hasText(m model.Message) bool {
	for _, b := range m.Content {
		if b.Type == model.BlockText {
			return true
		}
	}
	return false
}

func parse(text string) (plan, error) {
	var pl plan
	directive := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, "@") {
			continue
		}
		directive = true
		word, rest, _ := strings.Cut(line[1:], " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "text":
			pl.texts = append(pl.texts, rest)
		case "then":
			pl.then = rest
		case "redacted":
			pl.redacted = true
		case "think":
			pl.think = true
		case "tool":
			name, input, _ := strings.Cut(rest, " ")
			if name == "" {
				return pl, fmt.Errorf("@tool needs a name")
			}
			input = strings.TrimSpace(input)
			if input == "" {
				input = "{}"
			}
			if !json.Valid([]byte(input)) {
				return pl, fmt.Errorf("@tool %s: input is not valid JSON", name)
			}
			pl.tools = append(pl.tools, model.Block{Type: model.BlockToolUse, Name: name, Input: json.RawMessage(input)})
		case "sleep", "pace":
			d, err := time.ParseDuration(rest)
			if err != nil || d < 0 {
				return pl, fmt.Errorf("@%s: want a duration such as 2s, got %q", word, rest)
			}
			if word == "sleep" {
				pl.sleep = d
			} else {
				pl.pace = d
			}
		case "refuse":
			category, explanation, _ := strings.Cut(rest, " ")
			if category == "-" {
				category = ""
			}
			pl.refusal = &model.Refusal{Category: category, Explanation: strings.TrimSpace(explanation)}
		case "fail":
			kind, times, _ := strings.Cut(rest, " ")
			if _, ok := failures[kind]; !ok {
				return pl, fmt.Errorf("@fail: unknown kind %q", kind)
			}
			pl.fail = kind
			if times != "" {
				n, err := strconv.Atoi(strings.TrimSpace(times))
				if err != nil || n < 1 {
					return pl, fmt.Errorf("@fail: bad count %q", times)
				}
				pl.failTimes = n
			}
		default:
			return pl, fmt.Errorf("unknown directive @%s", word)
		}
	}
	if !directive {
		echo := strings.TrimSpace(text)
		if echo == "" {
			echo = "(empty message)"
		}
		pl.texts = []string{"You said: " + echo}
	}
	return pl, nil
}

var failures = map[string]struct {
	kind   model.Kind
	status int
	msg    string
}{
	"overloaded":   {model.KindOverloaded, 529, "Overloaded"},
	"rate_limited": {model.KindRateLimited, 429, "Rate limited"},
	"server":       {model.KindRequestFailed, 500, "Internal server error"},
	"invalid":      {model.KindInvalid, 400, "Invalid request"},
	"billing":      {model.KindBilling, 402, "Your credit balance is too low"},
	"auth":         {model.KindInvalid, 401, "Invalid API key"},
}

func failure(kind string, attempt int) error {
	f := failures[kind]
	e := &model.Error{Kind: f.kind, StatusCode: f.status, Message: fmt.Sprintf("%s (scripted failure, attempt %d)", f.msg, attempt)}
	if f.kind == model.KindRateLimited {
		e.RetryAfter = time.Second
	}
	return e
}

// wait sleeps for d or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func summarize(results []model.Block) string {
	var parts []string
	for _, r := range results {
		var text []string
		for _, c := range r.Content {
			if c.Type == model.BlockText {
				text = append(text, c.Text)
			}
		}
		s := strings.Join(text, " ")
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		status := "returned"
		if r.IsError {
			status = "failed"
		}
		parts = append(parts, fmt.Sprintf("The tool %s: %s", status, s))
	}
	return strings.Join(parts, "\n")
}

func chunks(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

func tokens(req *model.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Input)
			for _, c := range b.Content {
				n += len(c.Text)
			}
		}
	}
	return n/4 + 1
}

func outTokens(r *model.Response) int {
	n := 0
	for _, b := range r.Content {
		n += len(b.Text) + len(b.Input)
	}
	return n/4 + 1
}
