// Package executor implements reins.executor.v1, the protocol that connects
// the machines that run tools ("hands", executors) to the reins harness.
//
// The protocol is JSON-RPC 2.0 over WebSocket: one message per text frame,
// requests in both directions. An executor first exchanges its long-lived
// credential (an environment key or a machine token) for a short-lived
// executor token at the token endpoint, connects to /v1/executor/connect,
// registers its capabilities with executor.register and then keeps its
// session leases alive with executor.heartbeat while it serves
// session.assign, tool.call, tool.cancel, session.release, process.* and
// terminal.* requests from the harness.
//
// The package is the executor end, and what both ends share:
//
//   - [Client] is the executor end. [Client.Run] connects, registers,
//     serves and reconnects with exponential backoff until a terminal error.
//     With the "agent" capability it is an agent end too: it runs the
//     turns the harness sends ([AgentHandler]).
//   - The wire: the methods, the params and results of each ([Assignment],
//     [ToolCallParams], [ToolResult], [TurnStart], …), the errors and close
//     codes, and [Conn], the JSON-RPC connection either end speaks over.
//   - [BuiltinSessions] is the built-in toolset a [Client] serves by
//     default: each session's bash, processes and terminals run in a
//     sandbox of their own ([Sandboxes]) unless the caller opts out with
//     Unconfined, and Run fails with [ErrSandboxUnavailable] rather than
//     run them unconfined when no sandbox can start.
//
// Errors follow the protocol's error model: a JSON-RPC error is an
// [*RPCError] (a handler that returns one keeps its code on the wire),
// connections end with the close codes 4001–4005 ([CloseCode],
// [IsTerminalCloseCode]), and the sentinel errors ([ErrReplaced],
// [ErrCredentialRejected], …) are matched with [errors.Is].
//
// The harness end (the hub that issues executor tokens, places sessions
// under leases and dispatches tool calls) is part of the reins server,
// not of this package: it imports this package for the wire.
package executor
