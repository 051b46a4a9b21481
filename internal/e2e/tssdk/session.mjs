// Drives a reins server with the official Anthropic TypeScript SDK:
// node session.mjs BASE_URL API_KEY. Exits non-zero on any mismatch.
import Anthropic, { toFile } from '@anthropic-ai/sdk';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });

function check(cond, msg) {
  if (!cond) {
    console.error('FAIL: ' + msg);
    process.exit(1);
  }
}

const agent = await client.beta.agents.create({ name: 'ts agent', model: 'scripted' });
check(agent.id.startsWith('agent_') && agent.version === 1, 'agent created');
const env = await client.beta.environments.create({ name: 'ts env' });
const session = await client.beta.sessions.create({ agent: agent.id, environment_id: env.id });
check(session.status === 'idle', 'session idle');

const stream = await client.beta.sessions.events.stream(session.id, { event_deltas: ['agent.message'] });
await client.beta.sessions.events.send(session.id, {
  events: [{ type: 'user.message', content: [{ type: 'text', text: '@pace 5ms\n@text hello from typescript' }] }],
});
const seen = [];
let text = '';
for await (const ev of stream) {
  seen.push(ev.type);
  if (ev.type === 'agent.message') text = ev.content.map((c) => c.text).join('');
  if (ev.type === 'session.status_idle') break;
}
check(text === 'hello from typescript', `agent.message text: ${text}`);
for (const t of ['session.status_running', 'span.model_request_start', 'agent.message', 'span.model_request_end', 'session.status_idle']) {
  check(seen.includes(t), `stream lacks ${t}: ${seen.join(',')}`);
}

const listed = [];
for await (const ev of client.beta.sessions.events.list(session.id, { limit: 2 })) listed.push(ev.type);
check(listed.includes('agent.message') && listed.length >= 6, `list: ${listed.join(',')}`);

try {
  await client.beta.sessions.retrieve('sesn_missing');
  check(false, 'retrieving a missing session succeeded');
} catch (err) {
  check(err instanceof Anthropic.NotFoundError, `missing session error: ${err}`);
}
// Files: an upload and its download, byte for byte.
const bytes = Buffer.from(Array.from({ length: 300000 }, (_, i) => (i * 7) % 256));
const uploaded = await client.beta.files.upload({ file: await toFile(bytes, 'data.bin', { type: 'application/octet-stream' }) });
check(uploaded.id.startsWith('file_') && uploaded.size_bytes === bytes.length && uploaded.filename === 'data.bin', `upload: ${JSON.stringify(uploaded)}`);
const meta = await client.beta.files.retrieveMetadata(uploaded.id);
check(meta.id === uploaded.id, 'file metadata');
const downloaded = Buffer.from(await (await client.beta.files.download(uploaded.id)).arrayBuffer());
check(downloaded.equals(bytes), `download: ${downloaded.length} bytes, want the ${bytes.length} uploaded`);
await client.beta.files.delete(uploaded.id);

console.log('ok', seen.length, 'stream events,', listed.length, 'listed');
