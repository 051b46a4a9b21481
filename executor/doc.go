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
// The package holds both ends so that the harness and every executor share
// one implementation:
//
//   - [Client] is the executor end. [Client.Run] connects, registers,
//     serves and reconnects with exponential backoff until a terminal error.
//   - [Hub] is the harness end: an [net/http.Handler] that serves the token
//     endpoint and the connect endpoint, places sessions on executors under
//     leases ([Hub.Assign]) and dispatches tool calls ([Lease.CallTool]).
//   - [NewLocal] runs a [Client] inside the harness process, connected to a
//     [Hub] over an in-memory connection, so that cloud environments run
//     their tools the same way self-hosted executors do.
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
// [ErrToolOutcomeUnknown], …) are matched with [errors.Is].
package executor
