// The executor the reins e2e tests drive (internal/e2e/sdkexecutor_test.go):
// bash, a custom read and a write that always refuses with a typed error.
// It prints one JSON line per event and, at the end, the error it ended with.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ExecutorClient, RpcError, bashTool, closeCodeOf } from '../dist/index.js';

const [url, key, name, workspace] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const bash = bashTool();

const client = new ExecutorClient({
  url,
  environmentKey: key,
  executor: { name },
  workspace,
  backoffMinMs: 50,
  backoffMaxMs: 300,
  tools: {
    bash: (input, ctx) => {
      ctx.signal.addEventListener('abort', () => out({ event: 'aborted', tool_call_id: ctx.toolCallId }));
      return bash(input, ctx);
    },
    read: async (input, ctx) => readFile(path.join(ctx.cwd, path.normalize('/' + input.file_path)), 'utf8'),
    write: () => {
      throw RpcError.withReason(-32001, 'workspace_read_only', 'this executor refuses writes');
    },
  },
  onEvent: (e) => out({ event: e.type, tool_call_id: e.toolCallId, tool: e.tool, reason: e.reason }),
});
process.on('SIGTERM', () => client.stop());
client.run().catch((e) => {
  out({ ended: e.name, close_code: closeCodeOf(e), message: e.message });
  process.exit(0);
});
