// An executor serving bash and a custom tool, each session in its own
// directory under ./work. Run with REINS_URL and REINS_ENVIRONMENT_KEY set:
//   node examples/executor.mjs
import { ExecutorClient, bashTool } from '@reins/executor';

const client = new ExecutorClient({
  url: process.env.REINS_URL,
  environmentKey: process.env.REINS_ENVIRONMENT_KEY,
  workspace: './work',
  tools: { bash: bashTool(), word_count: (input) => String(input.text.split(/\s+/).filter(Boolean).length) },
  onEvent: (e) => console.log(e.type, e.tool ?? ''),
});
process.on('SIGINT', () => client.stop());
await client.run().catch((e) => console.error(e.message));
