// Package executorhub is the harness end of reins.executor.v1, the
// protocol that connects the machines that run tools (executors) and
// agent loops (agent ends) to the server. The executor end and the wire
// it shares with this package are the public package
// [github.com/reinsdev/reins/executor].
//
//   - [Hub] is an [net/http.Handler] that serves the token endpoint and
//     the connect endpoint, places sessions on executors under leases
//     ([Hub.Assign]), dispatches tool calls ([Lease.CallTool]) and starts
//     agent-end turns ([Hub.StartTurn]).
//   - [NewLocal] runs an [executor.Client] inside the server process,
//     connected to a [Hub] over an in-memory connection, so that cloud
//     environments run their tools the way self-hosted executors do.
//
// The hub speaks the server's tool contract ([tool.Call], [tool.Result])
// to its callers; the protocol's own types stop at this package.
package executorhub
