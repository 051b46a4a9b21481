import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  AssignRejectedError,
  ClientStoppedError,
  NotConnectedError,
  RequestTimeoutError,
  RpcError,
  SessionEndedError,
  ToolOutcomeUnknownError,
  codeMessage,
  isTerminalCloseCode,
} from '../dist/index.js';

test('every code of the protocol has its message', () => {
  const table = {
    [-32700]: 'parse_error',
    [-32600]: 'invalid_request',
    [-32601]: 'method_not_found',
    [-32602]: 'invalid_params',
    [-32603]: 'internal_error',
    [-32000]: 'unauthorized',
    [-32001]: 'forbidden',
    [-32002]: 'not_found',
    [-32003]: 'lease_expired',
    [-32004]: 'timeout',
    [-32005]: 'canceled',
    [-32006]: 'payload_too_large',
    [-32007]: 'session_not_active',
    [-32008]: 'mcp_unavailable',
    [-32009]: 'executor_busy',
    [-32010]: 'unsupported_protocol',
    [-32011]: 'resource_unavailable',
    [-32012]: 'capability_unavailable',
    [-32013]: 'conflict',
  };
  for (const [code, message] of Object.entries(table)) {
    assert.equal(codeMessage(Number(code)), message);
    assert.equal(new RpcError(Number(code)).message, message);
  }
  assert.equal(codeMessage(-1), '');
});

test('RpcError.withReason and toJSON', () => {
  const e = RpcError.withReason(-32011, 'workspace_unavailable', 'disk full');
  assert.ok(e instanceof Error);
  assert.equal(e.code, -32011);
  assert.equal(e.reason, 'workspace_unavailable');
  assert.equal(e.retryable, true); // -32011 is retryable
  assert.deepEqual(e.toJSON(), { code: -32011, message: 'disk full', data: { retryable: true, reason: 'workspace_unavailable' } });
  assert.deepEqual(JSON.parse(JSON.stringify(new RpcError(-32601))), { code: -32601, message: 'method_not_found' });
  assert.equal(new RpcError(-32601).retryable, undefined);
  assert.equal(new RpcError(-32009, '', { retryable: false }).retryable, false);
  const back = RpcError.fromJSON({ code: -32012, message: 'x', data: { capability: 'tool:read', extra: 1 } });
  assert.equal(back.data.capability, 'tool:read');
  assert.equal(back.data.extra, 1); // fields it does not know pass through
});

test('terminal close codes', () => {
  assert.equal(isTerminalCloseCode(4003), true);
  assert.equal(isTerminalCloseCode(4004), true);
  for (const c of [1000, 1006, 4001, 4002, 4005]) assert.equal(isTerminalCloseCode(c), false);
});

test('the seed classes and their messages', () => {
  assert.equal(new NotConnectedError().message, 'executor channel is not connected');
  assert.equal(new ClientStoppedError().message, 'client stopped');
  assert.equal(new RequestTimeoutError('tool.result').method, 'tool.result');
  assert.equal(new SessionEndedError().message, 'session ended');
  assert.match(new ToolOutcomeUnknownError().message, /tool outcome unknown/);
  assert.equal(new AssignRejectedError().message, 'executor rejected session.assign');
  for (const E of [NotConnectedError, ClientStoppedError, SessionEndedError, ToolOutcomeUnknownError, AssignRejectedError]) {
    assert.equal(new E().name, E.name);
  }
});
