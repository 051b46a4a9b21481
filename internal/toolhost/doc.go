// Package toolhost is the tool host: it runs the tool calls the harness
// makes (the contract is package tool). It places sessions on executors
// through the executor hub — remote executors for self-hosted
// environments, an in-process executor per cloud environment whose tools
// run in per-session sandboxes — within the server's tool slots, and it
// readies and keeps what the tools work on: workspaces, outputs, session
// resources, skills, environment packages, credentials injected at egress
// and redacted from results, agent ends and the model gateway's turns,
// and, on replicas, which replica holds which hands. The MCP servers'
// pools are its sub-package mcphost.
package toolhost
