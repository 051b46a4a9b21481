// Package connector is the MCP client side of the harness: a per-session
// Pool of connections to an agent's remote MCP servers (streamable HTTP,
// falling back to the older SSE transport), authenticated with bearer
// tokens from the session's vaults.
//
// The pool connects lazily, lists tools under collision-free model-facing
// names (mcp__<server>__<tool>), calls them, reconnects after a server
// restart and closes with the session. Connection-level failures are
// *Error values of kind ConnectionFailed or AuthenticationFailed, which the
// harness reports as session.error mcp_connection_failed_error and
// mcp_authentication_failed_error. A tool that fails is not an error: it is
// a Result with IsError set, which the model reads.
package connector
