// Package mcp serves a catalogue of operations over the Model Context
// Protocol, on top of github.com/modelcontextprotocol/go-sdk.
//
// An [Operation] is a named, schema-described unit of work with a
// [Handler]. A [Server] publishes its operations in one of two modes:
//
//   - [Compact] (the default) publishes exactly three outer tools,
//     search_tools, get_tool_details and call_tool, however many
//     operations there are.
//   - [Direct] publishes one MCP tool per operation.
//
// Every failed operation reaches the caller as a tool result with isError
// set and the structured content {"failure":{"code","message","retryable"}},
// mirrored as a JSON text block. The codes are the closed set of [Code]
// constants; only the code and a caller-safe message reach the wire, while
// a failure's private cause goes to the server's log.
//
// Handlers may ask the user for confirmation through elicitation with
// [Call.Ask]. On clients that speak the multi round-trip protocol the chain
// is carried by signed continuation tokens; on older stateful sessions the
// server elicits inline.
package mcp
