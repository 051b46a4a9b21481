// Package tools is the built-in agent toolset of reins: bash, read, write,
// edit, glob and grep over a workspace directory, plus the processes and
// pseudo-terminals of the executor protocol.
//
// Every path goes through an [os.Root], so no relative path, "..", absolute
// path or symbolic link reaches outside the workspace: such a call fails
// with the error code "workspace_boundary". A read-only workspace refuses
// every mutation with "workspace_read_only". On Linux, bash and every
// process run confined by Landlock to the workspace plus read-only system
// directories when the kernel supports it.
//
// The file tools (read, write, edit, glob, grep) act on regular files and
// directories only. Whatever bash leaves in the workspace, a FIFO, a socket
// or a device, is refused with "invalid_input" (or, for glob, only listed
// by name) without blocking, and no read goes past a fixed limit. Files
// and directories they create can be given to another user
// ([WorkspaceOptions.Owner]), and a sandbox may show the workspace at
// another path ([WorkspaceOptions.VisibleDir]).
//
// A [Session] holds the per-session state (the persistent shell, processes,
// terminals); [Session.Call] runs one tool call and always returns a
// [Result]: failures are results with IsError set, for the model to read.
package tools
