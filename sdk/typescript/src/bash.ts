// A bash tool: runs the command with bash in the session's directory.

import { spawn } from 'node:child_process';
import type { ToolContext, ToolResult } from './client.js';

/** Output kept per result: the head and the tail, with a marker between. */
const MAX_OUTPUT = 100 * 1024;

/**
 * Returns a handler for a `bash` tool ({"command": "..."}) that runs the
 * command with `bash -c` in `ctx.cwd` (the session's directory), with the
 * session's variables added to the environment, and kills its process group
 * when the call is canceled. It does not sandbox anything: run the executor
 * where model-written commands can do no harm (a container or VM).
 */
export function bashTool(options: { shell?: string; env?: NodeJS.ProcessEnv } = {}) {
  return (input: { command?: unknown }, ctx: ToolContext): Promise<ToolResult> =>
    new Promise((resolve) => {
      if (typeof input?.command !== 'string' || input.command === '') {
        resolve({ content: [{ type: 'text', text: 'command is required' }], is_error: true });
        return;
      }
      const child = spawn(options.shell ?? 'bash', ['-c', input.command], {
        cwd: ctx.cwd || undefined,
        env: { ...(options.env ?? process.env), ...ctx.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      let omitted = 0;
      const keep = (b: Buffer) => {
        if (size + b.length <= MAX_OUTPUT) {
          chunks.push(b);
          size += b.length;
        } else {
          omitted += b.length; // the head is kept; the tail is kept below
          tail = Buffer.concat([tail, b]).subarray(-MAX_OUTPUT / 2);
        }
      };
      let tail = Buffer.alloc(0);
      child.stdout.on('data', keep);
      child.stderr.on('data', keep);
      const kill = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone already */
        }
      };
      ctx.signal.addEventListener('abort', kill, { once: true });
      child.on('error', (err) => {
        ctx.signal.removeEventListener('abort', kill);
        resolve({ content: [{ type: 'text', text: `bash could not start: ${err.message}` }], is_error: true });
      });
      child.on('close', (code, signal) => {
        ctx.signal.removeEventListener('abort', kill);
        let text = Buffer.concat(chunks).toString('utf8');
        if (omitted > 0) {
          text += `\n[output truncated: ${Math.max(0, omitted - tail.length)} bytes omitted]\n` + tail.toString('utf8');
        }
        const failed = code !== 0;
        if (failed) text += `\n(exit ${code ?? signal})`;
        resolve({ content: [{ type: 'text', text: text || '(no output)' }], is_error: failed });
      });
    });
}
