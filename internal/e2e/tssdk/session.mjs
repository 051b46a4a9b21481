// Drives a reins server with the official Anthropic TypeScript SDK:
// node session.mjs BASE_URL API_KEY. Exits non-zero on any mismatch.
import Anthropic from '@anthropic-ai/sdk';

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
console.log('ok', seen.length, 'stream events,', listed.length, 'listed');
