import assert from 'node:assert/strict';
import http from 'node:http';
import { afterEach, test } from 'node:test';
import {
  AssignRejectedError,
  ExecutorClient,
  RpcError,
  SessionEndedError,
  ToolCallHttpError,
  ToolOutcomeUnknownError,
  TurnCanceledError,
  mcpUnavailable,
} from '../dist/index.js';
import { assign, fakeHub } from './hub.mjs';

let cleanup = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

// agentEnd starts an agent end whose turns are handed to the test.
function agentEnd(hub, options = {}) {
  const turns = [];
  const waiters = [];
  const client = new ExecutorClient({
    url: hub.url,
    machineToken: 'reins_mt_test',
    executor: { name: 'brain' },
    backoffMinMs: 10,
    backoffMaxMs: 20,
    agent: (turn) => {
      const w = waiters.shift();
      if (w) w(turn);
      else turns.push(turn);
      return new Promise((r) => turn.signal.addEventListener('abort', r));
    },
    ...options,
  });
  client.run().catch(() => {});
  cleanup.push(() => client.stop(), () => hub.close());
  const nextTurn = () => (turns.length ? Promise.resolve(turns.shift()) : new Promise((r) => waiters.push(r)));
  return { client, nextTurn };
}

const turnStart = (peer, extra = {}) =>
  peer.request('turn.start', { session_id: 'sesn_1', turn_id: 'turn_1', inputs: [{ type: 'user.message' }], transcript: [], ...extra });

// answerNext answers the agent end's next request of method with result or error.
async function answerNext(peer, method, answer) {
  const m = await peer.next((x) => x.method === method);
  peer.send({ jsonrpc: '2.0', id: m.id, ...answer });
  return m;
}

test('an agent end declares agent, runs turn.start and sends session.event with sequences', async () => {
  const hub = await fakeHub();
  const { nextTurn } = agentEnd(hub);
  const peer = await hub.peer(1);
  assert.deepEqual(peer.registerParams.capabilities, ['agent']);
  assert.equal(peer.registerParams.features, undefined); // no transcript_deltas: whole transcripts
  assert.deepEqual((await turnStart(peer)).result, { accepted: true });
  const turn = await nextTurn();
  assert.equal(turn.sessionId, 'sesn_1');
  assert.equal(turn.start.inputs[0].type, 'user.message');

  const sent = turn.send({ type: 'agent.message' }, { type: 'agent.thinking' });
  const first = await answerNext(peer, 'session.event', { result: { next_sequence: 2 } });
  await sent;
  assert.equal(first.params.sequence, 0);
  assert.equal(first.params.events.length, 2);

  // A conflict: rejected, and the next send continues from expected_sequence.
  const gap = turn.send({ type: 'agent.message' });
  await answerNext(peer, 'session.event', { error: { code: -32013, message: 'conflict', data: { expected_sequence: 5 } } });
  const err = await gap.catch((e) => e);
  assert.ok(err instanceof RpcError && err.code === -32013);
  assert.equal(turn.nextSequence, 5);
  const end = turn.endTurn();
  const last = await answerNext(peer, 'session.event', { result: { next_sequence: 6 } });
  await end;
  assert.equal(last.params.sequence, 5);
  assert.deepEqual(last.params.events, [{ type: 'turn.end' }]);

  // After the end: turn_inactive is SessionEndedError.
  const late = turn.send({ type: 'agent.message' });
  await answerNext(peer, 'session.event', { error: { code: -32007, message: 'session_not_active', data: { reason: 'turn_inactive' } } });
  const ended = await late.catch((e) => e);
  assert.ok(ended instanceof SessionEndedError, String(ended));
  assert.equal(ended.reason, 'turn_inactive');
  assert.ok(ended.cause instanceof RpcError);
});

test('token refreshes update the turn grants; refusals keep their reasons', async () => {
  const hub = await fakeHub();
  const { nextTurn } = agentEnd(hub);
  const peer = await hub.peer(1);
  await turnStart(peer, { tools: { url: 'http://x/v1/sessions/sesn_1/tool_calls', token: 'rtt_1', expires_at: new Date().toISOString() } });
  const turn = await nextTurn();
  const fresh = turn.refreshToolsToken();
  const req = await answerNext(peer, 'tools_token.refresh', { result: { token: 'rtt_2', expires_at: '2099-01-01T00:00:00Z' } });
  assert.deepEqual(req.params, { session_id: 'sesn_1', turn_id: 'turn_1' });
  assert.equal((await fresh).token, 'rtt_2');
  assert.equal(turn.start.tools.url, 'http://x/v1/sessions/sesn_1/tool_calls'); // kept when the refresh has none
  const model = turn.refreshModelToken();
  await answerNext(peer, 'model_token.refresh', { error: { code: -32011, message: 'resource_unavailable', data: { reason: 'model_token_unavailable' } } });
  const err = await model.catch((e) => e);
  assert.ok(err instanceof RpcError && err.reason === 'model_token_unavailable', String(err));
});

test('turn.cancel aborts the turn signal', async () => {
  const hub = await fakeHub();
  const { nextTurn } = agentEnd(hub);
  const peer = await hub.peer(1);
  await turnStart(peer);
  const turn = await nextTurn();
  peer.notify('turn.cancel', { session_id: 'sesn_1', turn_id: 'turn_1', reason: 'interrupt' });
  await new Promise((r) => turn.signal.addEventListener('abort', r));
  assert.ok(turn.signal.reason instanceof TurnCanceledError);
  assert.equal(turn.signal.reason.reason, 'interrupt');
});

test('acceptTurn refuses with mcpUnavailable: -32008 with the session.error type', async () => {
  const hub = await fakeHub();
  let ran = false;
  agentEnd(hub, {
    agent: () => {
      ran = true;
    },
    acceptTurn: (start) => {
      throw mcpUnavailable(start.agent.mcp_servers[0].name, new Error('connection refused'));
    },
  });
  const peer = await hub.peer(1);
  const res = await turnStart(peer, { agent: { mcp_servers: [{ name: 'tools', url: 'http://127.0.0.1:1' }] } });
  assert.equal(res.error.code, -32008);
  assert.equal(res.error.message, 'mcp_unavailable');
  assert.deepEqual(
    { reason: res.error.data.reason, server: res.error.data.mcp_server_name, retryable: res.error.data.retryable },
    { reason: 'mcp_connection_failed_error', server: 'tools', retryable: true },
  );
  assert.match(res.error.data.detail, /connection refused/);
  assert.equal(ran, false);
});

test('an executor without an agent handler answers turn.start -32012', async () => {
  const hub = await fakeHub();
  const client = new ExecutorClient({ url: hub.url, environmentKey: 'k', executor: { name: 'hands' }, tools: { echo: () => 'x' } });
  client.run().catch(() => {});
  cleanup.push(() => client.stop(), () => hub.close());
  const peer = await hub.peer(1);
  const res = await turnStart(peer);
  assert.equal(res.error.code, -32012);
  assert.equal(res.error.data.capability, 'agent');
});

// toolsEndpoint serves POST …/tool_calls with answers taken in order.
async function toolsEndpoint(answers) {
  const seen = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ auth: req.headers.authorization, key: req.headers['idempotency-key'], body: JSON.parse(body) });
      const [status, out] = answers.shift() ?? [500, {}];
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(out));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(() => server.close());
  return { url: `http://127.0.0.1:${server.address().port}/v1/sessions/sesn_1/tool_calls`, seen };
}

test('callTool: idempotency key, 401 refresh, in_progress wait, refusals as results', async () => {
  const ep = await toolsEndpoint([
    [401, { type: 'error', error: { type: 'authentication_error', message: 'the tools token expired' } }],
    [200, { tool_call_id: 'sevt_1', status: 'in_progress', content: [], is_error: true, error_code: 'in_progress' }],
    [200, { tool_call_id: 'sevt_1', status: 'completed', content: [{ type: 'text', text: 'hi\n' }], is_error: false, error_code: '' }],
  ]);
  const hub = await fakeHub();
  const { nextTurn } = agentEnd(hub);
  const peer = await hub.peer(1);
  await turnStart(peer, { tools: { url: ep.url, token: 'rtt_1', expires_at: '2099-01-01T00:00:00Z' } });
  const turn = await nextTurn();
  const call = turn.callTool({ name: 'bash', input: { command: 'echo hi' } });
  await answerNext(peer, 'tools_token.refresh', { result: { token: 'rtt_2', expires_at: '2099-01-01T00:00:00Z' } });
  const res = await call;
  assert.equal(res.content[0].text, 'hi\n');
  assert.deepEqual(ep.seen.map((s) => s.auth), ['Bearer rtt_1', 'Bearer rtt_2', 'Bearer rtt_2']);
  assert.equal(new Set(ep.seen.map((s) => s.key)).size, 1); // one key for the call and its retries
  assert.deepEqual(ep.seen[0].body, { name: 'bash', input: { command: 'echo hi' } });
});

test('callTool: 409 turn_inactive is SessionEndedError, 400 ToolCallHttpError, no answer ToolOutcomeUnknownError', async () => {
  const ep = await toolsEndpoint([
    [409, { type: 'error', error: { type: 'invalid_request_error', message: 'turn_inactive: the turn is not running' } }],
    [400, { type: 'error', error: { type: 'invalid_request_error', message: 'input: not an object' } }],
  ]);
  const hub = await fakeHub();
  const { nextTurn } = agentEnd(hub);
  const peer = await hub.peer(1);
  await turnStart(peer, { tools: { url: ep.url, token: 'rtt_1', expires_at: '2099-01-01T00:00:00Z' } });
  const turn = await nextTurn();
  const ended = await turn.callTool({ name: 'bash', input: {} }).catch((e) => e);
  assert.ok(ended instanceof SessionEndedError && ended.reason === 'turn_inactive', String(ended));
  assert.ok(ended.cause instanceof ToolCallHttpError && ended.cause.status === 409);
  const bad = await turn.callTool({ name: 'bash', input: 1 }).catch((e) => e);
  assert.ok(bad instanceof ToolCallHttpError && bad.status === 400, String(bad));

  turn.start.tools.url = 'http://127.0.0.1:1/v1/sessions/sesn_1/tool_calls'; // nothing listens
  const lost = await turn.callTool({ name: 'bash', input: {}, idempotencyKey: 'k-1' }).catch((e) => e);
  assert.ok(lost instanceof ToolOutcomeUnknownError, String(lost));
  assert.equal(lost.idempotencyKey, 'k-1');
});

test('executor end: -32007 to call() is SessionEndedError; refusals of session.assign are AssignRejectedError', async () => {
  const hub = await fakeHub();
  const events = [];
  const client = new ExecutorClient({
    url: hub.url,
    environmentKey: 'k',
    executor: { name: 'hands' },
    tools: { echo: () => 'x' },
    onAssign: (a) => {
      if (a.session_id === 'sesn_no') throw new AssignRejectedError('session_rejected', 'not this one');
    },
    onEvent: (e) => events.push(e),
  });
  client.run().catch(() => {});
  cleanup.push(() => client.stop(), () => hub.close());
  const peer = await hub.peer(1);
  assert.deepEqual((await assign(peer, 'sesn_no')).result, { accepted: false, reason: 'session_rejected', message: 'not this one' });
  assert.deepEqual((await assign(peer, 'sesn_2', 'lease_2', ['bash'])).result.reason, 'session_rejected');
  const rejected = events.filter((e) => e.type === 'session_rejected');
  assert.equal(rejected.length, 2);
  assert.ok(rejected.every((e) => e.error instanceof AssignRejectedError && e.error.reason === 'session_rejected'));

  peer.answerResults = false;
  const call = client.call('tool.result', { session_id: 'sesn_gone', tool_call_id: 'c', content: [] });
  await answerNext(peer, 'tool.result', { error: { code: -32007, message: 'session_not_active' } });
  assert.ok((await call.catch((e) => e)) instanceof SessionEndedError);
});
