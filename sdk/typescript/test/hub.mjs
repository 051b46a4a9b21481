// A fake harness for the unit tests: the token endpoint and the connect
// endpoint on loopback, speaking the wire format of reins.executor.v1.
import http from 'node:http';
import { WebSocketServer } from 'ws';

export async function fakeHub({ tokenStatus = 200, features = ['result_in_ack'], register } = {}) {
  const hub = { tokens: 0, peers: [], waiters: [], tokenStatus, features };
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/executor/tokens') {
      res.writeHead(404).end();
      return;
    }
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      hub.lastTokenRequest = { auth: req.headers.authorization, body: JSON.parse(body) };
      if (hub.tokenStatus !== 200) {
        res.writeHead(hub.tokenStatus, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'environment key revoked' } }));
        return;
      }
      hub.tokens++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          type: 'executor_token',
          token: 'tok' + hub.tokens,
          expires_at: new Date(Date.now() + 3600_000).toISOString(),
          url: `ws://127.0.0.1:${hub.port}/v1/executor/connect`,
        }),
      );
    });
  });
  const wss = new WebSocketServer({
    server,
    handleProtocols: (protocols) => (protocols.has('reins.executor.v1') ? 'reins.executor.v1' : false),
  });
  wss.on('connection', (ws, req) => {
    const peer = newPeer(ws, req, hub, register);
    hub.peers.push(peer);
    for (const w of hub.waiters.splice(0)) w(peer);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  hub.port = server.address().port;
  hub.url = `http://127.0.0.1:${hub.port}`;
  /** Resolves with the n-th (1-based) registered peer. */
  hub.peer = async (n) => {
    while (hub.peers.length < n) await new Promise((r) => hub.waiters.push(r));
    const p = hub.peers[n - 1];
    await p.registered;
    return p;
  };
  hub.close = () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.close();
  };
  return hub;
}

function newPeer(ws, req, hub, register) {
  const peer = { ws, auth: req.headers.authorization, protocol: ws.protocol, frames: [], pending: new Map(), nextId: 1000, listeners: [] };
  let resolveRegistered;
  peer.registered = new Promise((r) => (resolveRegistered = r));
  peer.send = (m) => ws.send(JSON.stringify(m));
  peer.request = (method, params) => {
    const id = peer.nextId++;
    peer.send({ jsonrpc: '2.0', id, method, params });
    return new Promise((r) => peer.pending.set(id, r));
  };
  peer.notify = (method, params) => peer.send({ jsonrpc: '2.0', method, params });
  /** Resolves with the next request from the executor that pred accepts (seen ones included). */
  peer.next = (pred) =>
    new Promise((resolve) => {
      const hit = peer.frames.find(pred);
      if (hit) {
        peer.frames.splice(peer.frames.indexOf(hit), 1);
        resolve(hit);
        return;
      }
      peer.listeners.push({ pred, resolve });
    });
  peer.answerResults = true;
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString());
    if (m.method === undefined) {
      peer.pending.get(m.id)?.(m);
      peer.pending.delete(m.id);
      return;
    }
    if (m.method === 'executor.register') {
      peer.registerParams = m.params;
      const res = register?.(m.params, hub) ?? {
        executor_id: 'exec_1',
        heartbeat_interval_ms: 50,
        lease_ttl_ms: 30000,
        resumed: m.params.sessions.map((s) => s.session_id),
        lost: [],
        features: hub.features,
      };
      if (res.error) {
        peer.send({ jsonrpc: '2.0', id: m.id, error: res.error });
        ws.close(4002, 'runtime registration refused'); // as reins does
      }
      else peer.send({ jsonrpc: '2.0', id: m.id, result: res });
      resolveRegistered();
      return;
    }
    if (m.method === 'executor.heartbeat') {
      peer.send({ jsonrpc: '2.0', id: m.id, result: { renewed: [], lost: [] } });
      return;
    }
    if (m.method === 'tool.result' && peer.answerResults) {
      peer.send({ jsonrpc: '2.0', id: m.id, result: { duplicate: false } });
    }
    const l = peer.listeners.find((x) => x.pred(m));
    if (l) {
      peer.listeners.splice(peer.listeners.indexOf(l), 1);
      l.resolve(m);
    } else {
      peer.frames.push(m);
    }
  });
  return peer;
}

export const assign = (peer, sessionId = 'sesn_1', leaseId = 'lease_1', tools = []) =>
  peer.request('session.assign', { session_id: sessionId, lease_id: leaseId, tools, workspace: { read_only: false } });

export const toolCall = (peer, id, name, input = {}, sessionId = 'sesn_1', leaseId = 'lease_1') =>
  peer.request('tool.call', { session_id: sessionId, lease_id: leaseId, tool_call_id: id, name, input });
