package harness

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/reinsdev/reins/internal/awaiting"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/outcomes"
	ma "github.com/reinsdev/reins/managedagents"
)

// runnable reports whether the harness runs the tool use now: allowed,
// and neither a custom tool (the client answers) nor one a pull worker
// runs.
func runnable(u awaiting.Use) bool {
	return !u.ClientRuns && u.Event.Type != ma.EventAgentCustomToolUse && u.Allowed()
}

// mayHaveStarted reports whether a tool use without result may have
// reached what runs it. The harness's own built-in tools are answered in
// the log when a turn cuts them off (answerCutOff), so one left here never
// started; a custom tool, or a tool of a pull worker or an MCP server
// that was allowed to run, was handed out as soon as it was logged or
// confirmed.
func mayHaveStarted(u awaiting.Use) bool {
	switch {
	case u.Event.Type == ma.EventAgentCustomToolUse:
		return true
	case u.Event.Type == ma.EventAgentMCPToolUse, u.ClientRuns:
		return u.Allowed()
	}
	return false
}

// view is what the log says about a session: the transcript for the model
// and the state of the current turn.
type view struct {
	messages []model.Message
	// fold holds the unsettled tool uses and whether a turn is active,
	// folded by the rule the sessions service checks client input with.
	fold *awaiting.Fold
	// openSpan is the id of a span.model_request_start without end.
	openSpan string
	// lastIdleIDs are the event_ids of the latest requires_action idle.
	lastIdleIDs []string
	// outcome folds the session's outcomes (user.define_outcome).
	outcome *outcomes.Fold
	// inbox holds the agent.thread_message_received events not yet in
	// the transcript: a message another thread sent while this one's
	// turn could not take user text (a model call in flight, tool uses
	// without results, or no turn at all).
	inbox []ma.Event
	// answered reports that the model's last response ended the turn's
	// work (no tool use) and nothing came since: a coordinator whose
	// threads still run waits for their replies.
	answered bool
}

// turnActive reports a turn that started and has not ended (running, or
// idle waiting on requires_action).
func (v *view) turnActive() bool { return v.fold.TurnActive() }

// awaitingIDs returns the ids of the tool uses that wait for the client.
func (v *view) awaitingIDs() []string { return v.fold.Awaiting() }

// awaitsClient reports whether some tool use waits for a pull worker.
func (v *view) awaitsClient() bool { return v.fold.AwaitsWorker() }

// runnable returns the tool uses the harness should run now.
func (v *view) runnable() []awaiting.Use {
	var out []awaiting.Use
	for _, u := range v.fold.Pending() {
		if runnable(u) {
			out = append(out, u)
		}
	}
	return out
}

// transcriptBuilder accumulates messages, merging consecutive blocks of the
// same role (the Messages API wants strict alternation).
type transcriptBuilder struct {
	msgs []model.Message
}

func (b *transcriptBuilder) add(role model.Role, blocks ...model.Block) {
	if len(blocks) == 0 {
		return
	}
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == role {
		b.msgs[n-1].Content = append(b.msgs[n-1].Content, blocks...)
		return
	}
	b.msgs = append(b.msgs, model.Message{Role: role, Content: blocks})
}

// projector folds events into a view, one at a time, so that a runner
// keeps its view warm and reads only new log entries.
type projector struct {
	v  *view
	tb transcriptBuilder
	// The latest compaction hides the transcript up to hideThrough and
	// starts it with summary.
	hideThrough, summary string
	hiding               bool
	// hidden holds the unsettled tool uses the summary hid: the
	// transcript has no tool_use block to answer.
	hidden map[string]bool
	// respUses counts the tool uses of the model response being
	// recorded; ended is set when one without tool uses was.
	respUses int
	ended    bool
}

func newProjector(client bool, hideThrough, summary string) *projector {
	return &projector{v: &view{fold: awaiting.NewFold(client), outcome: outcomes.NewFold()}, hideThrough: hideThrough, summary: summary, hiding: hideThrough != ""}
}

// view returns the current view (shared: it changes with the next feed).
func (p *projector) view() *view {
	p.v.messages = p.tb.msgs
	n := len(p.tb.msgs)
	p.v.answered = p.ended && n > 0 && p.tb.msgs[n-1].Role == model.RoleAssistant
	return p.v
}

// feed folds one event, in log order: into the transcript, with the tool
// uses as they stood before it, then into the fold.
func (p *projector) feed(ev ma.Event) {
	if p.hiding && ev.ID == p.hideThrough {
		// Everything so far is folded into the summary.
		p.hiding = false
		p.tb.msgs = []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: p.summary}}}}
		p.hidden = make(map[string]bool)
		for _, u := range p.v.fold.Pending() {
			p.hidden[u.Event.ID] = true
		}
	}
	p.transcribe(ev)
	p.v.fold.Feed(ev)
	p.v.outcome.Feed(ev)
	switch {
	case ev.Type == ma.EventStatusIdle && ev.StopReason != nil && ev.StopReason.Type == ma.StopRequiresAction:
		p.v.lastIdleIDs = ev.StopReason.EventIDs
	case ev.Type == ma.EventStatusIdle:
		p.v.lastIdleIDs = nil
	case ev.Type == ma.EventSpanModelRequestStart:
		p.v.openSpan = ev.ID
		p.respUses, p.ended = 0, false
	case ev.Type == ma.EventSpanModelRequestEnd:
		p.v.openSpan = ""
		p.ended = p.respUses == 0 && (ev.IsError == nil || !*ev.IsError)
	}
	p.flushInbox()
}

// flushInbox adds the waiting thread messages to the transcript as user
// text, once the turn can take it: a turn is active, no model call is in
// flight and every tool use has its result.
func (p *projector) flushInbox() {
	if len(p.v.inbox) == 0 || !p.v.fold.TurnActive() || p.v.openSpan != "" || len(p.v.fold.Pending()) > 0 {
		return
	}
	for _, ev := range p.v.inbox {
		p.tb.add(model.RoleUser, receivedBlocks(ev)...)
	}
	p.v.inbox = nil
}

// ThreadMessagePrefix starts the text a coordinator's model reads for a
// message another thread sent it: "Message from thread <id> (agent
// "<name>"):" and a newline, then the message. A thread's task, from
// the primary thread, is given as sent.
const ThreadMessagePrefix = "Message from thread "

// receivedBlocks returns the transcript's blocks of a received thread
// message.
func receivedBlocks(ev ma.Event) []model.Block {
	blocks := contentToBlocks(ev.Content)
	if ev.FromAgentName == "" {
		return blocks // from the primary thread: the task as given
	}
	head := fmt.Sprintf("%s%s (agent %q):", ThreadMessagePrefix, ev.FromSessionThreadID, ev.FromAgentName)
	for i := range blocks {
		if blocks[i].Type == model.BlockText {
			blocks[i].Text = head + "\n" + blocks[i].Text
			return blocks
		}
	}
	return append([]model.Block{{Type: model.BlockText, Text: head + "\n(no text)"}}, blocks...)
}

// transcribe adds what one event says to the transcript. A queued client
// event is skipped; its processed echo, later in the log, counts where it
// is.
func (p *projector) transcribe(ev ma.Event) {
	switch ev.Type {
	case ma.EventUserMessage, ma.EventSystemMessage:
		if ev.ProcessedAt == nil {
			return // still queued, or flushed
		}
		p.closeOpen()
		p.tb.add(model.RoleUser, messageBlocks(ev)...)
	case ma.EventAgentMessage:
		p.tb.add(model.RoleAssistant, contentToBlocks(ev.Content)...)
	case ma.EventAgentToolUse, ma.EventAgentToolResult:
		switch {
		case len(ev.ServerBlock) > 0:
			// A tool the model's API ran: its block goes back verbatim,
			// in the assistant's turn; nothing here runs or awaits it.
			p.tb.add(model.RoleAssistant, model.Block{Type: model.BlockServer, Raw: json.RawMessage(ev.ServerBlock)})
		case ev.Type == ma.EventAgentToolResult:
			p.result(ev)
		default:
			p.use(ev)
		}
	case ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse:
		p.use(ev)
	case ma.EventUserToolConfirmation:
		p.confirmation(ev)
	case ma.EventThreadMessageReceived:
		p.v.inbox = append(p.v.inbox, ev)
	case ma.EventUserCustomToolResult, ma.EventUserToolResult, ma.EventAgentMCPToolResult:
		p.result(ev)
	case ma.EventStatusIdle:
		if ev.StopReason == nil || ev.StopReason.Type != ma.StopRequiresAction {
			p.closeOpen()
		}
	case ma.EventUserDefineOutcome, ma.EventSpanOutcomeEvaluationEnd:
		p.transcribeOutcome(ev)
	}
}

// messageBlocks returns a processed user or system message's blocks, a
// system message's text marked as such.
func messageBlocks(ev ma.Event) []model.Block {
	blocks := contentToBlocks(ev.Content)
	if ev.Type == ma.EventSystemMessage {
		for i := range blocks {
			if blocks[i].Type == model.BlockText {
				blocks[i].Text = "<system>" + blocks[i].Text + "</system>"
			}
		}
	}
	return blocks
}

// closeOpen gives every unsettled tool use a synthetic error result: each
// tool_use needs a tool_result before the next user text. The fold
// abandons them next.
func (p *projector) closeOpen() {
	for _, u := range p.v.fold.Pending() {
		if p.hidden[u.Event.ID] {
			continue
		}
		reason := toolNotRunText
		if mayHaveStarted(u) {
			reason = toolUnansweredText
		}
		p.tb.add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: u.Event.ID, IsError: true,
			Content: []model.Block{{Type: model.BlockText, Text: reason}}})
	}
	p.hidden = nil
}

// use adds a tool use the harness, a client or an MCP server answers.
func (p *projector) use(ev ma.Event) {
	p.respUses++
	input := ev.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	p.tb.add(model.RoleAssistant, model.Block{Type: model.BlockToolUse, ID: ev.ID, Name: modelToolName(ev), Input: input})
}

// confirmation adds the error result of a tool use the user denied.
func (p *projector) confirmation(ev ma.Event) {
	u, ok := p.v.fold.Find(ev.ToolUseID)
	if !ok || u.Decision != "" || ev.Result != "deny" || p.hidden[u.Event.ID] {
		return
	}
	msg := "The user denied this tool call."
	if ev.DenyMessage != "" {
		msg = "The user denied this tool call: " + ev.DenyMessage
	}
	p.tb.add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: u.Event.ID, IsError: true,
		Content: []model.Block{{Type: model.BlockText, Text: msg}}})
}

// result adds the result of an unsettled tool use; one the turn left
// unanswered already has its synthetic result.
func (p *projector) result(ev ma.Event) {
	id := firstNonEmpty(ev.ToolUseID, ev.CustomToolUseID, ev.MCPToolUseID)
	if _, ok := p.v.fold.Find(id); !ok || p.hidden[id] {
		return
	}
	p.tb.add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: id, IsError: ev.IsError != nil && *ev.IsError,
		Content: contentToBlocks(ev.Content)})
}

// projectAll folds a session's live events (in log order) into a
// projector, to be fed later events. client says whether pull workers run
// the session's built-in tools.
func projectAll(events []ma.Event, client bool) *projector {
	hideThrough, summary := "", ""
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == ma.EventAgentContextCompacted && events[i].CompactedThrough != "" {
			hideThrough = events[i].CompactedThrough
			for _, c := range events[i].Content {
				summary += c.Text
			}
			break
		}
	}
	p := newProjector(client, hideThrough, summary)
	for _, ev := range events {
		p.feed(ev)
	}
	return p
}

func modelToolName(ev ma.Event) string {
	if ev.Type == ma.EventAgentMCPToolUse {
		return mcpToolName(ev.MCPServerName, ev.Name)
	}
	return ev.Name
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// RedactedPlaceholder is the text the model reads for a redacted block:
// the withheld content is not there to send, and the placeholder keeps a
// message of only redacted blocks from being empty.
const RedactedPlaceholder = "[redacted]"

// contentToBlocks maps API content blocks to model blocks.
func contentToBlocks(content []ma.ContentBlock) []model.Block {
	out := make([]model.Block, 0, len(content))
	for _, c := range content {
		switch c.Type {
		case "text":
			out = append(out, model.Block{Type: model.BlockText, Text: c.Text})
		case ma.BlockRedacted:
			out = append(out, model.Block{Type: model.BlockText, Text: RedactedPlaceholder})
		case "image":
			out = append(out, model.Block{Type: model.BlockImage, Source: c.Source})
		case "document":
			out = append(out, model.Block{Type: model.BlockDocument, Source: c.Source, Title: c.Title, Context: c.Context})
		case "search_result":
			var texts []string
			for _, t := range c.Content {
				texts = append(texts, t.Text)
			}
			out = append(out, model.Block{Type: model.BlockText, Text: c.Title + "\n" + strings.Join(texts, "\n")})
		}
	}
	return out
}

// blocksToContent maps model text and redacted blocks back to API
// content.
func blocksToContent(blocks []model.Block) []ma.ContentBlock {
	out := make([]ma.ContentBlock, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case model.BlockText:
			out = append(out, ma.ContentBlock{Type: "text", Text: b.Text})
		case model.BlockRedacted:
			out = append(out, ma.ContentBlock{Type: ma.BlockRedacted})
		}
	}
	return out
}
