// Drives a reins server with the official Anthropic TypeScript SDK:
// node session.mjs BASE_URL API_KEY. Exits non-zero on any mismatch.
import Anthropic, { toFile } from '@anthropic-ai/sdk';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0 });

// A stream that never ends fails the script in a minute, naming the step,
// rather than hanging the Go test.
let step = 'start';
setTimeout(() => {
  console.error(`FAIL: timed out at ${step}`);
  process.exit(2);
}, 60_000).unref();

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

// A multi-agent session streamed end to end: a coordinator delegates to two
// roster agents in parallel; the session stream shows the threads, their
// status and the answers; each child's thread stream shows its own turn;
// the coordinator's final answer collects both answers.
const one = await client.beta.agents.create({ name: 'one', model: 'scripted' });
const two = await client.beta.agents.create({ name: 'two', model: 'scripted' });
const coord = await client.beta.agents.create({
  name: 'coordinator', model: 'scripted', multiagent: { type: 'coordinator', agents: [one.id, two.id] },
});
const multi = await client.beta.sessions.create({ agent: coord.id, environment_id: env.id });
check(multi.agent.multiagent?.agents?.length === 2 && multi.agent.multiagent.agents[0].name === 'one', `multi-agent snapshot: ${JSON.stringify(multi.agent.multiagent)}`);
const spawn = (agent, task) => `@tool spawn_agent ${JSON.stringify({ agent, task })}`;
step = 'multi-agent session stream';
const mstream = await client.beta.sessions.events.stream(multi.id, { event_deltas: ['agent.message'] });
await client.beta.sessions.events.send(multi.id, {
  events: [{ type: 'user.message', content: [{ type: 'text', text: `${spawn('one', '@text answer of one')}\n${spawn('two', '@text answer of two')}\n@then Delegated.` }] }],
});
const mseen = [];
const threadNames = {};
const answers = {};
let finalText = '';
for await (const ev of mstream) {
  mseen.push(ev.type);
  if (ev.type === 'session.thread_created') threadNames[ev.session_thread_id] = ev.agent_name;
  if (ev.type === 'agent.thread_message_received') answers[ev.from_agent_name] = ev.content.map((c) => c.text).join('');
  if (ev.type === 'agent.message') finalText = ev.content.map((c) => c.text).join('');
  if (ev.type === 'session.status_idle') {
    check(ev.stop_reason.type === 'end_turn', `multi-agent idle: ${JSON.stringify(ev.stop_reason)}`);
    break;
  }
}
check(Object.keys(threadNames).length === 2, `threads created: ${JSON.stringify(threadNames)}`);
check(answers.one === 'answer of one' && answers.two === 'answer of two', `answers: ${JSON.stringify(answers)}`);
check(finalText.includes('answer of one') && finalText.includes('answer of two'), `final answer: ${finalText}`);
for (const t of ['session.thread_created', 'agent.thread_message_sent', 'session.thread_status_running', 'agent.thread_message_received', 'session.thread_status_idle']) {
  check(mseen.includes(t), `multi-agent stream lacks ${t}: ${mseen.join(',')}`);
}
step = 'thread list';
const threads = [];
for await (const th of client.beta.sessions.threads.list(multi.id)) threads.push(th);
check(threads.length === 3 && threads.every((th) => th.status === 'idle'), `threads: ${JSON.stringify(threads.map((th) => [th.id, th.status]))}`);
const childID = Object.keys(threadNames).find((id) => threadNames[id] === 'one');
const child = await client.beta.sessions.threads.retrieve(childID, { session_id: multi.id });
check(child.agent.name === 'one' && child.parent_thread_id, `thread: ${JSON.stringify(child)}`);
const childEvents = [];
for await (const ev of client.beta.sessions.threads.events.list(childID, { session_id: multi.id })) childEvents.push(ev);
const childText = childEvents.filter((ev) => ev.type === 'agent.message').map((ev) => ev.content.map((c) => c.text).join('')).join('');
check(childText === 'answer of one', `child transcript: ${childEvents.map((ev) => ev.type).join(',')}`);
// The child's thread stream, resumed from the log's start (Last-Event-ID
// 0; a stream otherwise starts at the log's end), replays its turn.
step = 'child thread stream';
const tstream = await client.beta.sessions.threads.events.stream(childID, { session_id: multi.id }, { headers: { 'Last-Event-ID': '0' } });
const tseen = [];
for await (const ev of tstream) {
  tseen.push(ev.type);
  if (ev.type === 'session.thread_status_idle') break;
}
check(tseen.includes('agent.message') && tseen.includes('agent.thread_message_sent'), `thread stream: ${tseen.join(',')}`);
const archived = await client.beta.sessions.threads.archive(childID, { session_id: multi.id });
check(archived.archived_at, `archive: ${JSON.stringify(archived)}`);

console.log('ok', seen.length, 'stream events,', listed.length, 'listed,', mseen.length, 'multi-agent stream events');
