import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import {
  ClientStoppedError,
  CredentialRejectedError,
  ExecutorClient,
  ReconnectExhaustedError,
  RegistrationRefusedError,
  ReplacedError,
  RpcError,
} from '../dist/index.js';
import { assign, fakeHub, toolCall } from './hub.mjs';

let cleanup = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

function start(hub, options = {}) {
  const client = new ExecutorClient({
    url: hub.url,
    environmentKey: 'reins_ek_test',
    executor: { name: 'unit' },
    backoffMinMs: 10,
    backoffMaxMs: 20,
    tools: {
      echo: (input) => `echo ${input.text}`,
      refuse: () => {
        throw RpcError.withReason(-32001, 'workspace_read_only', 'no writes here');
      },
      late_refuse: async () => {
        await new Promise((r) => setTimeout(r, 50)); // after the 20 ms acknowledgement
        throw RpcError.withReason(-32011, 'workspace_unavailable', 'disk gone');
      },
      slow: (input, ctx) =>
        new Promise((resolve) => {
          const t = setTimeout(() => resolve('slow done'), input.ms ?? 10_000);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(t);
            resolve('stopped early');
          });
        }),
    },
    ...options,
  });
  const ran = client.run();
  ran.catch(() => {});
  cleanup.push(() => client.stop(), () => hub.close());
  return { client, ran };
}

test('token exchange, subprotocol, registration with capabilities', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  assert.equal(hub.lastTokenRequest.auth, 'Bearer reins_ek_test');
  assert.equal(hub.lastTokenRequest.body.executor.name, 'unit');
  assert.equal(peer.auth, 'Bearer tok1');
  assert.equal(peer.protocol, 'reins.executor.v1');
  assert.equal(peer.registerParams.protocol, 'reins.executor.v1');
  assert.deepEqual(peer.registerParams.capabilities, ['tool:echo', 'tool:refuse', 'tool:late_refuse', 'tool:slow']);
  assert.equal(peer.registerParams.max_sessions, 1);
});

test('result_in_ack: a fast tool answers in the acknowledgement', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  assert.deepEqual((await assign(peer, 'sesn_1', 'lease_1', ['echo'])).result, { accepted: true });
  const ack = await toolCall(peer, 'call_1', 'echo', { text: 'hi' });
  assert.deepEqual(ack.result, { accepted: true, result: { content: [{ type: 'text', text: 'echo hi' }] } });
  // The same call again is never run twice.
  assert.deepEqual((await toolCall(peer, 'call_1', 'echo', { text: 'hi' })).result, { accepted: true });
});

test('without result_in_ack the result comes as tool.result', async () => {
  const hub = await fakeHub({ features: [] });
  start(hub);
  const peer = await hub.peer(1);
  await assign(peer);
  assert.deepEqual((await toolCall(peer, 'call_1', 'echo', { text: 'x' })).result, { accepted: true });
  const r = await peer.next((m) => m.method === 'tool.result');
  assert.deepEqual(r.params, { session_id: 'sesn_1', tool_call_id: 'call_1', content: [{ type: 'text', text: 'echo x' }] });
});

test('a handler that throws RpcError.withReason keeps its code and reason', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  await assign(peer);
  const ack = await toolCall(peer, 'call_1', 'refuse');
  assert.deepEqual(ack.error, { code: -32001, message: 'no writes here', data: { reason: 'workspace_read_only' } });
});

test('an RpcError thrown after the acknowledgement is an error result with its reason', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  await assign(peer);
  assert.deepEqual((await toolCall(peer, 'call_1', 'late_refuse')).result, { accepted: true });
  const r = await peer.next((m) => m.method === 'tool.result');
  assert.deepEqual(r.params, {
    session_id: 'sesn_1',
    tool_call_id: 'call_1',
    content: [{ type: 'text', text: 'disk gone' }],
    is_error: true,
    error_code: 'workspace_unavailable',
  });
});

test('timeout_ms aborts the handler with a timeout result', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  await assign(peer);
  const ack = await peer.request('tool.call', { session_id: 'sesn_1', lease_id: 'lease_1', tool_call_id: 'c', name: 'slow', input: {}, timeout_ms: 50 });
  assert.deepEqual(ack.result, { accepted: true });
  const r = await peer.next((m) => m.method === 'tool.result');
  assert.equal(r.params.error_code, 'timeout');
});

test('unknown tools, sessions and leases are refused with their codes', async () => {
  const hub = await fakeHub();
  start(hub);
  const peer = await hub.peer(1);
  assert.equal((await toolCall(peer, 'c', 'echo')).error.code, -32007);
  assert.deepEqual((await assign(peer, 'sesn_1', 'lease_1', ['bash'])).result.accepted, false);
  await assign(peer);
  assert.equal((await toolCall(peer, 'c', 'echo', {}, 'sesn_1', 'lease_old')).error.code, -32003);
  const e = (await toolCall(peer, 'c', 'bash')).error;
  assert.equal(e.code, -32012);
  assert.equal(e.data.capability, 'tool:bash');
  assert.equal((await peer.request('no.such', {})).error.code, -32601);
  assert.equal((await peer.request('process.start', { session_id: 'sesn_1' })).error.code, -32012);
});

test('tool.cancel aborts the handler', async () => {
  const hub = await fakeHub();
  const events = [];
  start(hub, { onEvent: (e) => events.push(e) });
  const peer = await hub.peer(1);
  await assign(peer);
  assert.deepEqual((await toolCall(peer, 'call_1', 'slow')).result, { accepted: true });
  peer.notify('tool.cancel', { session_id: 'sesn_1', tool_call_id: 'call_1', reason: 'canceled' });
  const r = await peer.next((m) => m.method === 'tool.result');
  assert.equal(r.params.is_error, true);
  assert.equal(r.params.error_code, 'canceled');
  assert.ok(events.some((e) => e.type === 'tool_canceled' && e.toolCallId === 'call_1'));
});

test('a result not acknowledged is sent again after a reconnect, and the session resumed', async () => {
  const hub = await fakeHub({ features: [] });
  start(hub);
  const first = await hub.peer(1);
  first.answerResults = false; // the result is written but never acknowledged
  await assign(first);
  await toolCall(first, 'call_1', 'echo', { text: 'once' });
  await first.next((m) => m.method === 'tool.result');
  first.ws.close(4005, 'drained');
  const second = await hub.peer(2);
  assert.deepEqual(second.registerParams.sessions, [{ session_id: 'sesn_1', lease_id: 'lease_1' }]);
  const r = await second.next((m) => m.method === 'tool.result');
  assert.equal(r.params.tool_call_id, 'call_1');
  assert.equal(r.params.content[0].text, 'echo once');
});

test('4001 gets a new token and reconnects at once', async () => {
  const hub = await fakeHub();
  start(hub);
  const first = await hub.peer(1);
  first.ws.close(4001, 'token expired');
  const second = await hub.peer(2);
  assert.equal(hub.tokens, 2);
  assert.equal(second.auth, 'Bearer tok2');
});

test('4004 ends the client with ReplacedError', async () => {
  const hub = await fakeHub();
  const { client, ran } = start(hub);
  const peer = await hub.peer(1);
  peer.ws.close(4004, 'replaced by a newer connection');
  const err = await ran.catch((e) => e);
  assert.ok(err instanceof ReplacedError);
  assert.ok(err instanceof ClientStoppedError);
  assert.equal(err.closeCode, 4004);
  assert.equal(client.error, err);
  await assert.rejects(client.call('x', {}), ClientStoppedError);
});

test('a rejected credential ends the client without retrying', async () => {
  const hub = await fakeHub({ tokenStatus: 401 });
  const { ran } = start(hub);
  const err = await ran.catch((e) => e);
  assert.ok(err instanceof CredentialRejectedError, String(err));
  assert.equal(err.status, 401);
  assert.match(err.message, /revoked/);
});

test('maxReconnectAttempts ends the client with ReconnectExhaustedError', async () => {
  const hub = await fakeHub({ tokenStatus: 503 });
  const { ran } = start(hub, { maxReconnectAttempts: 2 });
  const err = await ran.catch((e) => e);
  assert.ok(err instanceof ReconnectExhaustedError, String(err));
  assert.equal(err.attempts, 3);
});

test('refused registrations end the client with RegistrationRefusedError', async () => {
  const hub = await fakeHub({
    register: () => ({ error: { code: -32012, message: 'capability_unavailable', data: { reason: 'capability_missing' } } }),
  });
  const { ran } = start(hub);
  const err = await ran.catch((e) => e);
  assert.ok(err instanceof RegistrationRefusedError, String(err));
  assert.equal(hub.peers.length, 3);
});

test('stop ends run with ClientStoppedError', async () => {
  const hub = await fakeHub();
  const { client, ran } = start(hub);
  await hub.peer(1);
  client.stop();
  const err = await ran.catch((e) => e);
  assert.ok(err instanceof ClientStoppedError);
  assert.equal(err.closeCode, undefined);
});
