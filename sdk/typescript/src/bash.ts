// A bash tool: runs the command with bash in the session's sandbox.

import type { ToolContext, ToolResult } from './client.js';
import { checkSandbox, runCommand, type SandboxOptions } from './sandbox.js';

/**
 * Returns a handler for a `bash` tool ({"command": "..."}) that runs the
 * command with `bash -c` through {@link runCommand}: in a bubblewrap sandbox
 * of its own with the session's directory as `/workspace` and the session's
 * variables added to its environment, killed when the call is canceled.
 * It throws {@link SandboxUnavailableError} at once when the sandbox cannot
 * start here; `{ unconfined: true }` runs the commands on this host instead,
 * in `ctx.cwd`, with this process's environment.
 */
export function bashTool(options: SandboxOptions & { shell?: string } = {}) {
  checkSandbox(options);
  return (input: { command?: unknown }, ctx: ToolContext): Promise<ToolResult> => {
    if (typeof input?.command !== 'string' || input.command === '') {
      return Promise.resolve({ content: [{ type: 'text', text: 'command is required' }], is_error: true });
    }
    return runCommand([options.shell ?? 'bash', '-c', input.command], ctx, options);
  };
}
