package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	ma "github.com/reinsdev/reins/managedagents"
)

// streamItem is one frame of a session event stream: a persisted event,
// or a preview (event_start / event_delta) carrying Start, EventID and
// Delta.
type streamItem struct {
	ma.Event
	Start   *ma.PreviewEvent `json:"event,omitempty"`
	EventID string           `json:"event_id,omitempty"`
	Delta   *ma.PreviewDelta `json:"delta,omitempty"`
}

// Preview frame types.
const (
	previewStart = "event_start"
	previewDelta = "event_delta"
)

// style is how a line is coloured on a terminal.
type style int

const (
	stylePlain style = iota
	styleDim
	styleBold
	styleRed
	styleYellow
	styleGreen
	styleCyan
)

var ansi = map[style]string{
	styleDim: "\x1b[2m", styleBold: "\x1b[1m", styleRed: "\x1b[31m",
	styleYellow: "\x1b[33m", styleGreen: "\x1b[32m", styleCyan: "\x1b[36m",
}

// renderer turns a session's stream into text for a person. It is the
// testable core of `sessions run` and `sessions tail`: frames in, text out,
// no I/O. Streamed agent text is written as it arrives, without a trailing
// newline until the message is complete; everything else is whole lines.
type renderer struct {
	// color enables ANSI colours.
	color bool
	// showUser prints the person's own messages (tail), which `run` knows
	// already.
	showUser bool

	// midLine is set while streamed text has not ended its line.
	midLine bool
	// previewed is the text already written per message id and block.
	previewed map[string][]string
	// failures counts the retried failures of the current turn.
	failures int
	// seen holds the ids of persisted events already rendered: a queued
	// client event comes twice, and tail merges history with the stream.
	seen map[string]bool
	// tools are the tool uses seen, by event id, for results and prompts.
	tools map[string]ma.Event
	// decisions are the confirmations seen ("allow" or "deny"), by tool
	// use id.
	decisions map[string]string
	// working is set while the session runs a turn.
	working bool
	// threads are the agent names of the threads seen, by thread id.
	threads map[string]string
	// label prefixes the lines of the event being rendered: the thread
	// it came from (see threadLabel).
	label string
}

func newRenderer(color, showUser bool) *renderer {
	return &renderer{color: color, showUser: showUser, previewed: map[string][]string{}, seen: map[string]bool{}, tools: map[string]ma.Event{}, decisions: map[string]string{}, threads: map[string]string{}}
}

// Working reports whether the session is busy, for the spinner.
func (r *renderer) Working() bool { return r.working && !r.midLine }

// Tool returns a tool use event seen on the stream.
func (r *renderer) Tool(id string) (ma.Event, bool) {
	ev, ok := r.tools[id]
	return ev, ok
}

// AwaitsWorker reports whether a tool use a session waits on is run by a
// pull worker (which answers with user.tool_result) rather than answered
// by the person: a built-in tool call that was allowed, by its policy or
// by a confirmation. A session runs such calls itself otherwise, so one
// the session waits on is a pull worker's.
func (r *renderer) AwaitsWorker(id string) bool {
	ev, ok := r.tools[id]
	return ok && ev.Type == ma.EventAgentToolUse && (ev.EvaluatedPermission == "allow" || r.decisions[id] == "allow")
}

// Render returns the text for one frame ("" when it shows nothing).
func (r *renderer) Render(it streamItem) string {
	switch it.Type {
	case previewStart:
		// Thinking comes before the text it leads to: show it when it
		// starts, not when its event is committed with the answer.
		if it.Start != nil && it.Start.Type == ma.EventAgentThinking && it.Start.ID != "" && !r.seen[it.Start.ID] {
			r.seen[it.Start.ID] = true
			return r.line(styleDim, "… thinking")
		}
		return ""
	case previewDelta:
		return r.delta(it)
	}
	if it.ID != "" {
		// The queued echo of a client event (processed_at null) is
		// followed by the processed one; show whichever comes first, except
		// that a flushed event is always reported.
		if r.seen[it.ID] && !it.Flushed {
			return ""
		}
		r.seen[it.ID] = true
	}
	r.label = r.threadLabel(it.Event)
	defer func() { r.label = "" }()
	if isThreadEvent(it.Type) {
		return r.threadEvent(it.Event)
	}
	return r.event(it)
}

// event renders a committed event of the session or of a thread.
func (r *renderer) event(it streamItem) string {
	switch it.Type {
	case ma.EventStatusRunning:
		if !r.working {
			r.failures = 0
		}
		r.working = true
		return ""
	case ma.EventStatusIdle:
		r.working = false
		return r.idle(it.StopReason)
	case ma.EventStatusRescheduled:
		return r.line(styleYellow, "the session is being rescheduled; it resumes by itself")
	case ma.EventStatusTerminated:
		r.working = false
		return r.line(styleRed, "the session was terminated and accepts no more input")
	case ma.EventSessionDeleted:
		r.working = false
		return r.line(styleRed, "the session was deleted")
	case ma.EventSessionError:
		return r.sessionError(it.Error)
	case ma.EventAgentMessage:
		return r.message(it.Event)
	case ma.EventAgentThinking:
		return r.line(styleDim, "… thinking")
	case ma.EventAgentToolUse, ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse,
		ma.EventAgentToolResult, ma.EventAgentMCPToolResult, ma.EventUserToolResult,
		ma.EventUserToolConfirmation, ma.EventUserCustomToolResult:
		return r.toolEvent(it)
	case ma.EventUserMessage:
		if it.Flushed {
			return r.line(styleYellow, "not processed (the turn before it failed): "+oneLine(contentText(it.Content), 200))
		}
		if r.showUser {
			return r.line(styleBold, "› "+contentText(it.Content))
		}
		return ""
	case ma.EventUserInterrupt:
		return r.line(styleYellow, "interrupted")
	case ma.EventAgentContextCompacted:
		return r.line(styleDim, "(earlier turns were compacted to fit the context window)")
	case ma.EventUserDefineOutcome, ma.EventSpanOutcomeEvaluationStart, ma.EventSpanOutcomeEvaluationEnd:
		return r.outcome(it.Event)
	case ma.EventSpanModelRequestEnd:
		// A response cut short leaves its preview unterminated.
		if it.IsError != nil && *it.IsError && r.midLine {
			r.midLine = false
			return "\n"
		}
		return ""
	}
	return ""
}

// toolEvent renders a tool use, its confirmation and its result.
func (r *renderer) toolEvent(it streamItem) string {
	switch it.Type {
	case ma.EventAgentToolUse, ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse:
		r.tools[it.ID] = it.Event
		return r.line(r.toolUseStyle(it.Event), describeToolUse(it.Event))
	case ma.EventAgentToolResult, ma.EventAgentMCPToolResult:
		id := it.ToolUseID
		if it.Type == ma.EventAgentMCPToolResult {
			id = it.MCPToolUseID
		}
		return r.result(r.tools[id].Name, it.Content, it.IsError != nil && *it.IsError)
	case ma.EventUserToolResult:
		// A pull worker's result of a built-in tool.
		return r.result(r.tools[it.ToolUseID].Name, it.Content, it.IsError != nil && *it.IsError)
	case ma.EventUserToolConfirmation:
		r.decisions[it.ToolUseID] = it.Result
		name := r.tools[it.ToolUseID].Name
		if it.Result == "deny" {
			s := "✗ denied " + name
			if it.DenyMessage != "" {
				s += ": " + it.DenyMessage
			}
			return r.line(styleYellow, s)
		}
		return r.line(styleGreen, "✓ approved "+name)
	case ma.EventUserCustomToolResult:
		return r.result(r.tools[it.CustomToolUseID].Name, it.Content, it.IsError != nil && *it.IsError)
	}
	return ""
}

// delta writes a piece of streamed agent text.
func (r *renderer) delta(it streamItem) string {
	if it.Delta == nil || it.Delta.Content.Type != "text" {
		return ""
	}
	blocks := r.previewed[it.EventID]
	i := it.Delta.Index
	if i < 0 || i > len(blocks) {
		return "" // not contiguous: wait for the final message
	}
	var b strings.Builder
	if i == len(blocks) {
		blocks = append(blocks, "")
		if i > 0 {
			b.WriteString("\n")
		}
	}
	blocks[i] += it.Delta.Content.Text
	r.previewed[it.EventID] = blocks
	b.WriteString(it.Delta.Content.Text)
	r.midLine = true
	return b.String()
}

// message completes a streamed agent message, or writes it whole.
func (r *renderer) message(ev ma.Event) string {
	var b strings.Builder
	blocks := r.previewed[ev.ID]
	delete(r.previewed, ev.ID)
	n := 0
	for _, c := range ev.Content {
		if c.Type != "text" {
			continue
		}
		switch {
		case n < len(blocks) && strings.HasPrefix(c.Text, blocks[n]):
			b.WriteString(c.Text[len(blocks[n]):])
		case n < len(blocks):
			// The preview diverged from the final text: restate it.
			b.WriteString("\n" + c.Text)
		default:
			if n > 0 || r.midLine {
				b.WriteString("\n")
			}
			b.WriteString(c.Text)
		}
		n++
	}
	if n == 0 && !r.midLine {
		return ""
	}
	b.WriteString("\n")
	r.midLine = false
	return b.String()
}

func (r *renderer) toolUseStyle(ev ma.Event) style {
	switch ev.EvaluatedPermission {
	case "ask":
		return styleYellow
	case "deny":
		return styleRed
	}
	return styleCyan
}

// describeToolUse is the one-line form of a tool call.
func describeToolUse(ev ma.Event) string {
	name := ev.Name
	switch ev.Type {
	case ma.EventAgentCustomToolUse:
		name = "custom tool " + name
	case ma.EventAgentMCPToolUse:
		name = ev.MCPServerName + "/" + name
	}
	s := "→ " + name + " " + oneLine(unescapeJSON(string(ev.Input)), 160)
	switch ev.EvaluatedPermission {
	case "ask":
		s += "  (needs approval)"
	case "deny":
		s += "  (blocked)"
	}
	return s
}

func (r *renderer) result(name string, content []ma.ContentBlock, isError bool) string {
	text := oneLine(contentText(content), 200)
	if text == "" {
		text = "(no output)"
	}
	if name == "" {
		name = "tool"
	}
	if isError {
		return r.line(styleRed, "← "+name+" failed: "+text)
	}
	return r.line(styleDim, "← "+name+": "+text)
}

// idle ends the turn's output. Stop reasons that need words have had
// them already (session.error) or are handled by the caller (prompts).
func (r *renderer) idle(stop *ma.StopReason) string {
	out := ""
	if r.midLine {
		out = "\n"
		r.midLine = false
	}
	if stop == nil {
		return out
	}
	switch stop.Type {
	case ma.StopBudgetReached:
		out += r.line(styleYellow, "the session reached its budget; raise or remove it (session update) and it resumes by itself")
	case ma.StopRetriesExhausted:
		if r.failures == 0 {
			// No exhausted error was seen (tail joined late).
			out += r.line(styleRed, "the turn was abandoned after its retries ran out; send a new message to try again")
		}
	case ma.StopRequiresAction:
		var waits []string
		for _, id := range stop.EventIDs {
			ev, ok := r.tools[id]
			switch {
			case !ok:
				waits = append(waits, id)
			case ev.Type == ma.EventAgentCustomToolUse:
				waits = append(waits, "the result of custom tool "+ev.Name+r.inThread(ev))
			case r.AwaitsWorker(id):
				waits = append(waits, "a worker to run "+ev.Name+r.inThread(ev))
			default:
				waits = append(waits, "approval of "+ev.Name+r.inThread(ev))
			}
		}
		out += r.line(styleYellow, "waiting for "+strings.Join(waits, ", "))
	}
	r.failures = 0
	return out
}

var retryRE = regexp.MustCompile(`retrying in (\S+) \(attempt (\d+) of (\d+)\)`)

// sessionError explains a session.error by its retry status.
func (r *renderer) sessionError(e *ma.SessionError) string {
	if e == nil {
		return r.line(styleRed, "error (no details)")
	}
	short, long := errorCause(e)
	switch e.RetryStatus.Type {
	case ma.RetryRetrying:
		r.failures++
		if m := retryRE.FindStringSubmatch(e.Message); m != nil {
			return r.line(styleYellow, fmt.Sprintf("%s — retrying in %s (attempt %s of %s)…", short, m[1], m[2], m[3]))
		}
		return r.line(styleYellow, fmt.Sprintf("%s — retrying… (%s)", short, e.Message))
	case ma.RetryExhausted:
		n := r.failures + 1
		r.failures = n // an exhausted error counts even without retries
		attempts := strconv.Itoa(n) + " attempts"
		if n == 1 {
			attempts = "1 attempt"
		}
		return r.line(styleRed, fmt.Sprintf("turn abandoned after %s: %s; send a new message to try again", attempts, long)) +
			r.line(styleDim, "  server said: "+e.Message)
	case ma.RetryTerminal:
		return r.line(styleRed, fmt.Sprintf("%s: the session was terminated and accepts no more input", long)) +
			r.line(styleDim, "  server said: "+e.Message)
	}
	return r.line(styleRed, fmt.Sprintf("%s: %s", long, e.Message))
}

// errorCause names a session error type for a person: a short form for
// progress lines and a sentence fragment for outcomes.
func errorCause(e *ma.SessionError) (short, long string) {
	switch e.Type {
	case ma.ErrorModelOverloaded:
		return "model overloaded", "the model is overloaded"
	case ma.ErrorModelRateLimited:
		return "model rate limit reached", "the model's rate limit was reached"
	case ma.ErrorModelRequestFailed:
		return "model request failed", "the model request failed"
	case ma.ErrorBilling:
		return "billing problem", "the model provider refused the request for billing reasons"
	case ma.ErrorMCPConnectionFailed:
		return "cannot reach MCP server " + e.MCPServerName, "the MCP server " + e.MCPServerName + " could not be reached"
	case ma.ErrorMCPAuthenticationFailed:
		return "MCP server " + e.MCPServerName + " refused the credentials", "the MCP server " + e.MCPServerName + " refused the credentials"
	case ma.ErrorCredentialHostUnreachable:
		return "credential host unreachable", "the credential host could not be reached"
	case ma.ErrorToolUseLimitReached:
		return "tool-use limit reached", "the turn stopped at the limit of tool-use rounds"
	case ma.ErrorCompactionLimitReached:
		return "compaction limit reached", "the turn stopped after too many compactions in a row"
	case ma.ErrorRepositoryAuthentication, ma.ErrorRepositoryForbidden, ma.ErrorRepositoryNotFound,
		ma.ErrorRepositoryCheckout, ma.ErrorRepositoryClone:
		return "repository unavailable: " + e.RepositoryURL, "the repository " + e.RepositoryURL + " could not be cloned; the session goes on without it"
	}
	return "error", "an error occurred"
}

// line is a whole line in a style, starting on a fresh line, after the
// label of the thread whose event it renders.
func (r *renderer) line(s style, text string) string {
	prefix := ""
	if r.midLine {
		prefix = "\n"
		r.midLine = false
	}
	return prefix + styled(r.color, s, r.label+text)
}

// styled is a line of text in a style.
func styled(color bool, s style, text string) string {
	if color && s != stylePlain {
		return ansi[s] + text + "\x1b[0m\n"
	}
	return text + "\n"
}

// contentText joins the text of content blocks; other blocks are named.
func contentText(blocks []ma.ContentBlock) string {
	var parts []string
	for _, c := range blocks {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		case "search_result":
			parts = append(parts, contentText(c.Content))
		default:
			parts = append(parts, "["+c.Type+"]")
		}
	}
	return strings.Join(parts, " ")
}

// htmlEscapes are the escapes Go's encoding/json writes for characters
// that are safe in HTML only escaped; a person reads them unescaped.
var htmlEscapes = map[string]string{`\u003c`: "<", `\u003e`: ">", `\u0026`: "&", `\u2028`: "\u2028", `\u2029`: "\u2029"}

// unescapeJSON undoes the HTML-safe escapes in a JSON text, so that a tool
// input reads `{"command":"echo hi > f"}` rather than `\u003e`. Only
// escapes that start at a real backslash escape are replaced; the text
// stays the same JSON.
func unescapeJSON(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if i+6 <= len(s) {
			if r, ok := htmlEscapes[s[i:i+6]]; ok {
				b.WriteString(r)
				i += 5
				continue
			}
		}
		// Any other escape is kept whole, so an escaped backslash is not
		// read as the start of another escape.
		b.WriteString(s[i : i+2])
		i++
	}
	return b.String()
}
