// An executor serving bash (the SDK's) and read (its own), each session in
// its own directory under ./work and every call in a bubblewrap sandbox
// (no network, none of this process's environment, the session's directory
// at /workspace). reins sends executors the built-in toolset's names only:
// bash, read, write, edit, glob, grep. Run with REINS_URL and
// REINS_ENVIRONMENT_KEY set:
//   node examples/executor.mjs
// bashTool() throws SandboxUnavailableError when bwrap cannot start here;
// bashTool({ unconfined: true }) runs commands on this host instead.
import { ExecutorClient, bashTool, runCommand } from '@reins/executor';

const client = new ExecutorClient({
  url: process.env.REINS_URL,
  environmentKey: process.env.REINS_ENVIRONMENT_KEY,
  workspace: './work',
  tools: {
    bash: bashTool(),
    // A handler runs in this process: it reads through the sandbox rather
    // than opening a path the model chose.
    read: (input, ctx) => runCommand(['cat', '-n', '--', String(input.file_path)], ctx),
  },
  onEvent: (e) => console.log(e.type, e.tool ?? ''),
});
process.on('SIGINT', () => client.stop());
await client.run().catch((e) => console.error(e.message));
