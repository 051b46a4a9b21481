package harness

import (
	"encoding/json"
	"strings"

	"github.com/reinsdev/reins/internal/model"
	ma "github.com/reinsdev/reins/managedagents"
	"github.com/reinsdev/reins/tools/toolset"
)

// toolUse is a tool use the model asked for, as the log records it.
type toolUse struct {
	ev ma.Event
	// clientRuns: a pull worker runs this built-in tool and answers with
	// user.tool_result.
	clientRuns bool
	decision   string // "", "allow" or "deny" (from user.tool_confirmation)
	denyMsg    string
	resolved   bool // a result exists
	abandoned  bool // the turn ended before it resolved
}

// awaiting reports whether the tool use waits for the client: a custom tool
// without result, or an always_ask tool without confirmation.
func (u *toolUse) awaiting() bool {
	if u.resolved || u.abandoned {
		return false
	}
	switch {
	case u.ev.Type == ma.EventAgentCustomToolUse:
		return true
	case u.ev.EvaluatedPermission == "ask" && u.decision == "":
		return true
	default:
		return u.clientRuns && (u.ev.EvaluatedPermission == "allow" || u.decision == "allow")
	}
}

// awaitsClient reports whether the tool use waits for a pull worker's
// result.
func (u *toolUse) awaitsClient() bool {
	return u.awaiting() && u.clientRuns && (u.ev.EvaluatedPermission == "allow" || u.decision == "allow")
}

// runnable reports whether the harness should run the tool now.
func (u *toolUse) runnable() bool {
	if u.resolved || u.abandoned || u.clientRuns || u.ev.Type == ma.EventAgentCustomToolUse {
		return false
	}
	return u.ev.EvaluatedPermission == "allow" || u.decision == "allow"
}

// view is what the log says about a session: the transcript for the model
// and the state of the current turn.
type view struct {
	messages []model.Message
	uses     []*toolUse          // in the order the model asked
	byID     map[string]*toolUse // every tool use by event id
	// turnActive: a turn started and has not ended (running, or idle
	// waiting on requires_action).
	turnActive bool
	// openSpan is the id of a span.model_request_start without end.
	openSpan string
	// lastIdleIDs are the event_ids of the latest requires_action idle.
	lastIdleIDs []string
}

// transcriptBuilder accumulates messages, merging consecutive blocks of the
// same role (the Messages API wants strict alternation).
type transcriptBuilder struct {
	msgs []model.Message
	off  bool // build no transcript (a fold that needs the tool uses only)
}

func (b *transcriptBuilder) add(role model.Role, blocks ...model.Block) {
	if b.off || len(blocks) == 0 {
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
	v      *view
	client bool
	tb     transcriptBuilder
	// open: tool uses of the current model response(s) without a
	// transcript result yet.
	open []*toolUse
	// The latest compaction hides the transcript up to hideThrough and
	// starts it with summary.
	hideThrough, summary string
	hiding               bool
}

func newProjector(client bool, hideThrough, summary string) *projector {
	return &projector{v: &view{byID: make(map[string]*toolUse)}, client: client, hideThrough: hideThrough, summary: summary, hiding: hideThrough != ""}
}

// view returns the current view (shared: it changes with the next feed).
func (p *projector) view() *view {
	p.v.messages = p.tb.msgs
	return p.v
}

// closeOpen gives every tool use without a result a synthetic error result:
// each tool_use needs a tool_result before the next user text.
func (p *projector) closeOpen() {
	for _, u := range p.open {
		if !u.resolved {
			u.abandoned = true
			reason := toolNotRunText
			if u.mayHaveStarted() {
				reason = toolUnansweredText
			}
			p.tb.add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: u.ev.ID, IsError: true,
				Content: []model.Block{{Type: model.BlockText, Text: reason}}})
		}
	}
	p.open = nil
}

// mayHaveStarted reports whether a tool use without result may have
// reached what runs it. The harness's own built-in tools are answered in
// the log when a turn cuts them off (answerCutOff), so one left here never
// started; a custom tool, or a tool of a pull worker or an MCP server
// that was allowed to run, was handed out as soon as it was logged or
// confirmed.
func (u *toolUse) mayHaveStarted() bool {
	allowed := u.ev.EvaluatedPermission == "allow" || u.decision == "allow"
	switch {
	case u.ev.Type == ma.EventAgentCustomToolUse:
		return true
	case u.ev.Type == ma.EventAgentMCPToolUse, u.clientRuns:
		return allowed
	}
	return false
}

// feed folds one event, in log order. A queued client event is skipped;
// its processed echo, later in the log, counts where it is.
func (p *projector) feed(ev ma.Event) {
	if p.hiding && ev.ID == p.hideThrough {
		// Everything so far is folded into the summary.
		p.hiding = false
		p.tb.msgs = []model.Message{{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockText, Text: p.summary}}}}
		p.open = nil
	}
	switch ev.Type {
	case ma.EventUserMessage, ma.EventSystemMessage:
		if ev.ProcessedAt == nil {
			return // still queued, or flushed
		}
		p.closeOpen()
		blocks := contentToBlocks(ev.Content)
		if ev.Type == ma.EventSystemMessage {
			for i := range blocks {
				if blocks[i].Type == model.BlockText {
					blocks[i].Text = "<system>" + blocks[i].Text + "</system>"
				}
			}
		}
		p.tb.add(model.RoleUser, blocks...)
	case ma.EventAgentMessage:
		p.tb.add(model.RoleAssistant, contentToBlocks(ev.Content)...)
	case ma.EventAgentToolUse, ma.EventAgentToolResult:
		if len(ev.ServerBlock) > 0 {
			// A tool the model's API ran: its block goes back verbatim,
			// in the assistant's turn; nothing here runs or awaits it.
			p.tb.add(model.RoleAssistant, model.Block{Type: model.BlockServer, Raw: json.RawMessage(ev.ServerBlock)})
			return
		}
		if ev.Type == ma.EventAgentToolResult {
			p.result(ev)
			return
		}
		p.use(ev)
	case ma.EventAgentCustomToolUse, ma.EventAgentMCPToolUse:
		p.use(ev)
	case ma.EventUserToolConfirmation:
		if u := p.v.byID[ev.ToolUseID]; u != nil && u.decision == "" {
			u.decision = ev.Result
			u.denyMsg = ev.DenyMessage
			if ev.Result == "deny" {
				u.resolved = true
				msg := ev.DenyMessage
				if msg == "" {
					msg = "The user denied this tool call."
				} else {
					msg = "The user denied this tool call: " + msg
				}
				p.tb.add(model.RoleUser, model.Block{Type: model.BlockToolResult, ToolUseID: u.ev.ID, IsError: true,
					Content: []model.Block{{Type: model.BlockText, Text: msg}}})
			}
		}
	case ma.EventUserCustomToolResult, ma.EventUserToolResult, ma.EventAgentMCPToolResult:
		p.result(ev)
	case ma.EventStatusRunning:
		p.v.turnActive = true
	case ma.EventStatusIdle:
		if ev.StopReason != nil && ev.StopReason.Type == ma.StopRequiresAction {
			p.v.lastIdleIDs = ev.StopReason.EventIDs
			return
		}
		p.v.turnActive = false
		p.v.lastIdleIDs = nil
		for _, u := range p.open {
			if !u.resolved {
				u.abandoned = true
			}
		}
		p.closeOpen()
	case ma.EventStatusTerminated:
		p.v.turnActive = false
	case ma.EventSpanModelRequestStart:
		p.v.openSpan = ev.ID
	case ma.EventSpanModelRequestEnd:
		p.v.openSpan = ""
	}
}

// use folds a tool use the harness, a client or an MCP server answers.
func (p *projector) use(ev ma.Event) {
	u := &toolUse{ev: ev, clientRuns: p.client && ev.Type == ma.EventAgentToolUse && ev.EvaluatedPermission != "deny" && ev.Name != toolset.WebFetch}
	p.v.uses = append(p.v.uses, u)
	p.v.byID[ev.ID] = u
	p.open = append(p.open, u)
	input := ev.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	p.tb.add(model.RoleAssistant, model.Block{Type: model.BlockToolUse, ID: ev.ID, Name: modelToolName(ev), Input: input})
}

// result folds the result of a tool use folded by use.
func (p *projector) result(ev ma.Event) {
	id := firstNonEmpty(ev.ToolUseID, ev.CustomToolUseID, ev.MCPToolUseID)
	u := p.v.byID[id]
	if u == nil || u.resolved {
		return
	}
	u.resolved = true
	if u.abandoned {
		return // its transcript result was already synthesized
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

// awaitingIDs returns the ids of the tool uses that wait for the client.
func (v *view) awaitingIDs() []string {
	var ids []string
	for _, u := range v.uses {
		if u.awaiting() {
			ids = append(ids, u.ev.ID)
		}
	}
	return ids
}

// awaitsClient reports whether some tool use waits for a pull worker.
func (v *view) awaitsClient() bool {
	for _, u := range v.uses {
		if u.awaitsClient() {
			return true
		}
	}
	return false
}

// runnable returns the tool uses the harness should run now.
func (v *view) runnable() []*toolUse {
	var out []*toolUse
	for _, u := range v.uses {
		if u.runnable() {
			out = append(out, u)
		}
	}
	return out
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

// contentToBlocks maps API content blocks to model blocks.
func contentToBlocks(content []ma.ContentBlock) []model.Block {
	out := make([]model.Block, 0, len(content))
	for _, c := range content {
		switch c.Type {
		case "text":
			out = append(out, model.Block{Type: model.BlockText, Text: c.Text})
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

// blocksToContent maps model text blocks back to API content.
func blocksToContent(blocks []model.Block) []ma.ContentBlock {
	out := make([]ma.ContentBlock, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == model.BlockText {
			out = append(out, ma.ContentBlock{Type: "text", Text: b.Text})
		}
	}
	return out
}
