// Package toolset names the tools of the agent toolset
// (agent_toolset_20260401) and describes the built-in ones reins runs: the
// description and input schema the model is offered for each.
//
// It is the one list of built-in tools. It imports nothing of reins, so the
// API server and the harness can name the tools without linking their
// implementation (package tools, with its pseudo-terminals and Landlock).
package toolset

import "encoding/json"

// MayHaveRunText is the sentence of the outcome-unknown contract: every
// result of a tool call that was started and cut off before it reported
// ends with it, whatever cut it off (a lost executor, an interrupt, a
// crash of the server).
const MayHaveRunText = "The tool may or may not have run; check its effects before running it again."

// Tool is a built-in tool as the model is offered it.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's input, which
	// tools.DecodeInput accepts.
	InputSchema json.RawMessage
}

// Builtins returns the built-in tools reins runs, in the order they are
// offered to the model.
func Builtins() []Tool {
	return []Tool{
		{"bash", "Run a shell command in a persistent bash session.",
			json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"restart":{"type":"boolean"},"timeout_ms":{"type":"integer"}},"required":["command"]}`)},
		{"read", "Read a text file, optionally a range of lines.",
			json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"},"view_range":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2}},"required":["file_path"]}`)},
		{"write", "Create or overwrite a file.",
			json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}`)},
		{"edit", "Replace an exact string in a file.",
			json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"]}`)},
		{"glob", "Find files by glob pattern.",
			json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}`)},
		{"grep", "Search file contents with a regular expression.",
			json.RawMessage(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}`)},
	}
}

// Names returns the names of the built-in tools, in [Builtins] order.
func Names() []string {
	b := Builtins()
	names := make([]string, len(b))
	for i, t := range b {
		names[i] = t.Name
	}
	return names
}

// Names of the web tools of the agent toolset.
const (
	WebFetch  = "web_fetch"
	WebSearch = "web_search"
)

// WebFetchTool is web_fetch as reins offers it to models other than
// Claude: the server fetches the page itself (it is not one of
// [Builtins], which executors run).
func WebFetchTool() Tool {
	return Tool{WebFetch, "Fetch a web page (http or https URL) and return its text; HTML is converted to plain text, and long pages are truncated.",
		json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","description":"The http or https URL to fetch."}},"required":["url"]}`)}
}

// AgentToolset returns the names of every tool of agent_toolset_20260401:
// the built-in tools, then web_fetch and web_search. They are offered when
// a per-tool config enables them: for Claude models both as Anthropic's
// server tools, for other models web_fetch only, run by the server.
func AgentToolset() []string {
	return append(Names(), WebFetch, WebSearch)
}
