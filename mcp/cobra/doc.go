// Package cobra binds a Cobra command tree to the operations of an
// [mcp.Server]. Import it as mcpcobra.
//
// Each runnable, exposed command becomes an operation named
// <root>_<path>, with the input {"flags":{…},"args":[…]} and the output
// {"stdout","stderr","exitCode"}. A call runs the same binary as a child
// process, never through a shell, with flags passed as --name=value and
// "--" before the positional arguments, stdin closed, in a process group of
// its own. Execution slots, a timeout, a retained-output cap and a cleanup
// budget keep the host in control of what it started.
package cobra
