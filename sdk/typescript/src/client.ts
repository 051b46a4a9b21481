// The executor end of reins.executor.v1: token exchange, connect, register,
// heartbeats, tool calls, reconnect with resume. docs/executor.md in the
// reins repository describes the protocol.

import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { AgentTurns, type AgentHandler, type TurnStart } from './agent.js';
import { RpcConn, deferred, type Reply } from './conn.js';
import {
  AssignRejectedError,
  ClientStoppedError,
  CloseCode,
  ConnectionClosedError,
  CredentialRejectedError,
  ErrorCode,
  NotConnectedError,
  ReconnectExhaustedError,
  RegistrationRefusedError,
  ReplacedError,
  RpcError,
  closeCodeOf,
  codeMessage,
  errorText,
  rpcErrorOf,
  sessionEnded,
} from './errors.js';

/** The WebSocket subprotocol of the executor protocol. */
export const SUBPROTOCOL = 'reins.executor.v1';

/** How long a tool call may run before its tool.call is acknowledged without the result. */
const RESULT_IN_ACK_WINDOW_MS = 20;
/** Results sent in acknowledgements that may wait for proof of receipt before an early heartbeat. */
const MAX_UNPROVEN = 256;
/** tool_call_ids a session remembers, to never run a call twice. */
const MAX_SEEN_CALLS = 1024;

/** One block of a tool result. */
export interface ContentBlock {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/** The outcome of a tool call. A tool that ran and failed is a result with `is_error`. */
export interface ToolResult {
  content: ContentBlock[];
  is_error?: boolean;
  /** A machine-readable cause ("timeout", "workspace_boundary", …). */
  error_code?: string;
}

/** What a tool handler gets besides its input. */
export interface ToolContext {
  sessionId: string;
  toolCallId: string;
  /** Aborted on tool.cancel (an interrupt), at timeout_ms, on release or stop. */
  signal: AbortSignal;
  /** The session's variables from session.assign (its environment_variable credentials). */
  env: Record<string, string>;
  /** The session's directory (`workspace/<session_id>`), or "" without `workspace`. */
  cwd: string;
  /** Whether the session's workspace is read-only. */
  readOnly: boolean;
}

/**
 * Runs one tool call. It returns the result (a string is one text block) or
 * throws: an {@link RpcError} answers the tool.call with that JSON-RPC error
 * when the acknowledgement has not gone yet (a handler that throws at once),
 * otherwise it becomes an error result whose error_code is its reason; any
 * other exception is an error result with its message.
 */
export type ToolHandler = (input: any, ctx: ToolContext) => ToolResult | string | Promise<ToolResult | string>;

/** session.assign: the harness places a session on the executor under a lease. */
export interface Assignment {
  session_id: string;
  lease_id: string;
  lease_expires_at?: string;
  environment_id?: string;
  workspace?: { read_only?: boolean };
  tools?: string[];
  env?: Record<string, string>;
}

/** An executor token and where to connect with it. */
export interface Token {
  token: string;
  /** ISO 8601; a token within 30 s of it is not reused. */
  expiresAt?: string;
  /** The WebSocket URL; default: derived from `url`. */
  url?: string;
}

/** The executor as the server sees it. */
export interface ExecutorInfo {
  name: string;
  version?: string;
  os?: string;
  arch?: string;
  hostname?: string;
}

/** State changes, for display. */
export type ExecutorEvent =
  | { type: 'connecting'; attempt: number; error?: unknown }
  | { type: 'registered'; executorId: string; resumed: string[]; lost: string[] }
  | { type: 'disconnected'; error: unknown }
  | { type: 'session_assigned'; sessionId: string }
  | { type: 'session_released'; sessionId: string }
  /** The client answered session.assign accepted=false (`error.reason`: session_rejected, executor_busy, workspace_unavailable, …). */
  | { type: 'session_rejected'; sessionId: string; error: AssignRejectedError }
  | { type: 'turn_started'; sessionId: string; turnId: string }
  | { type: 'tool_started'; sessionId: string; toolCallId: string; tool: string }
  | { type: 'tool_finished'; sessionId: string; toolCallId: string; tool: string; result: ToolResult }
  | { type: 'tool_canceled'; sessionId: string; toolCallId: string; reason: string };

export interface ExecutorOptions {
  /** The reins server ("https://reins.example.com"). */
  url: string;
  /** The executor's credential: an environment key (reins_ek_…) or a machine token. */
  environmentKey?: string;
  machineToken?: string;
  /** Replaces the token endpoint. Throw CredentialRejectedError to end the client. */
  tokenSource?: () => Promise<Token>;
  /** The tools this executor runs, by name (none for an agent end that runs no tools). */
  tools?: Record<string, ToolHandler>;
  /**
   * Runs the turns of sessions whose metadata has "reins.agent_end": "true"
   * (an agent end; the client declares the "agent" capability). Nil:
   * turn.start is answered -32012.
   */
  agent?: AgentHandler;
  /**
   * Asked before a turn.start is acknowledged; throw to refuse the turn.
   * An RpcError keeps its code and data: `data.reason` is the
   * session.error type reins records and `data.retryable` whether it
   * starts the turn again (with its retry policy), as
   * {@link mcpUnavailable} does for an MCP server the turn needs. Any
   * other exception is -32603, recorded as unknown_error, not retried.
   */
  acceptTurn?: (start: TurnStart) => void | Promise<void>;
  /** Declared capabilities (default: "tool:<name>" for every tool, and "agent" with `agent`). */
  capabilities?: string[];
  /** Identity and description; name defaults to the host name. One name per environment: a second executor with it replaces the first (4004). */
  executor?: Partial<ExecutorInfo>;
  /** If set, every session gets the directory `workspace/<session_id>` (created at assignment), passed to handlers as `ctx.cwd`. */
  workspace?: string;
  /** Called for each new assignment; throw to refuse it: an AssignRejectedError or an RpcError gives the reason (default workspace_unavailable). */
  onAssign?: (a: Assignment) => void | Promise<void>;
  /** Called when a session leaves the executor (released, lost, or the client ended). */
  onRelease?: (sessionId: string) => void;
  /** Sessions at once (default 1). */
  maxSessions?: number;
  /** Tool calls at once (default 16 per session); beyond it tool.call is answered -32009. */
  maxConcurrentCalls?: number;
  /** Failed reconnects in a row that end the client with ReconnectExhaustedError; 0 (default) is unlimited. */
  maxReconnectAttempts?: number;
  /** Refused registrations in a row that end the client with RegistrationRefusedError (default 3). */
  maxRefusedRegistrations?: number;
  /** Reconnect backoff bounds, exponential with full jitter (defaults 500 ms and 30 s). */
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** Deadline of requests to the harness (default 30 s). */
  requestTimeoutMs?: number;
  /** Largest frame accepted (default 16 MiB). */
  maxFrameBytes?: number;
  onEvent?: (e: ExecutorEvent) => void;
  /** Diagnostics (default: none). */
  log?: (msg: string) => void;
}

interface SessionState {
  a: Assignment;
  cwd: string;
  calls: Map<string, AbortController>;
  seen: Set<string>;
  closed: boolean;
}

interface OutboxEntry {
  r: { session_id: string; tool_call_id: string } & ToolResult;
  /** The connection whose tool.call acknowledgement carried the result, or null. */
  ackConn: RpcConn | null;
  /** That acknowledgement was written. */
  acked: boolean;
}

type CallOutcome = { result: ToolResult } | { error: RpcError };

/**
 * The executor end of the protocol. `run()` connects, registers and serves
 * until a terminal error, which it rejects with: {@link ReplacedError} (4004),
 * {@link CredentialRejectedError}, {@link ReconnectExhaustedError},
 * {@link RegistrationRefusedError}, or {@link ClientStoppedError} (after
 * `stop()`, or 4003).
 */
export class ExecutorClient {
  private readonly opts: Required<
    Pick<
      ExecutorOptions,
      | 'maxSessions'
      | 'maxConcurrentCalls'
      | 'maxReconnectAttempts'
      | 'maxRefusedRegistrations'
      | 'backoffMinMs'
      | 'backoffMaxMs'
      | 'requestTimeoutMs'
      | 'maxFrameBytes'
    >
  > &
    ExecutorOptions;
  private readonly info: ExecutorInfo;
  private readonly caps: string[];
  private readonly log: (msg: string) => void;
  private conn: RpcConn | null = null;
  private dialing: WebSocket | null = null;
  private readonly sessions = new Map<string, SessionState>();
  private readonly turns: AgentTurns;
  private readonly outbox = new Map<string, OutboxEntry>();
  private inAck = false;
  private unproven = 0;
  private running = 0;
  private token: Token | null = null;
  private stopped = false;
  private ended = false;
  private err: Error | null = null;
  private wakeSleep: (() => void) | null = null;
  private prove: (() => void) | null = null;
  /** Protocol sent in executor.register (tests vary it). */
  protocol = SUBPROTOCOL;

  constructor(options: ExecutorOptions) {
    if (!options.url) throw new TypeError('ExecutorClient: url is required');
    if (!options.tokenSource && !options.environmentKey && !options.machineToken) {
      throw new TypeError('ExecutorClient: environmentKey, machineToken or tokenSource is required');
    }
    const maxSessions = options.maxSessions && options.maxSessions > 0 ? options.maxSessions : 1;
    this.opts = {
      ...options,
      maxSessions,
      maxConcurrentCalls: options.maxConcurrentCalls && options.maxConcurrentCalls > 0 ? options.maxConcurrentCalls : 16 * maxSessions,
      maxReconnectAttempts: Math.max(0, options.maxReconnectAttempts ?? 0),
      maxRefusedRegistrations: options.maxRefusedRegistrations && options.maxRefusedRegistrations > 0 ? options.maxRefusedRegistrations : 3,
      backoffMinMs: options.backoffMinMs && options.backoffMinMs > 0 ? options.backoffMinMs : 500,
      backoffMaxMs: options.backoffMaxMs && options.backoffMaxMs > 0 ? options.backoffMaxMs : 30_000,
      requestTimeoutMs: options.requestTimeoutMs && options.requestTimeoutMs > 0 ? options.requestTimeoutMs : 30_000,
      maxFrameBytes: options.maxFrameBytes && options.maxFrameBytes > 0 ? options.maxFrameBytes : 16 << 20,
    };
    const host = os.hostname();
    this.info = {
      name: options.executor?.name || host,
      hostname: options.executor?.hostname || host,
      os: options.executor?.os || process.platform,
      arch: options.executor?.arch || process.arch,
      ...(options.executor?.version ? { version: options.executor.version } : {}),
    };
    this.caps = options.capabilities ?? [...Object.keys(options.tools ?? {}).map((n) => 'tool:' + n), ...(options.agent ? ['agent'] : [])];
    this.turns = new AgentTurns(options.agent, options.acceptTurn, (m) => this.log(m));
    this.log = options.log ?? (() => {});
  }

  /** Why the client ended, or null while it runs. */
  get error(): Error | null {
    return this.err;
  }

  /**
   * Stops the client: the connection closes normally (the harness treats
   * the executor's sessions as lost), running calls are aborted and `run()`
   * rejects with ClientStoppedError.
   */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.conn?.close(1000, 'executor stopped');
    this.dialing?.terminate();
    this.wakeSleep?.();
  }

  /**
   * Sends a request to the harness over the registered connection. Rejects
   * with NotConnectedError when not registered, ClientStoppedError after
   * the client ended, SessionEndedError when the harness answers -32007
   * session_not_active, and RpcError for its other refusals.
   */
  async call(method: string, params: unknown): Promise<unknown> {
    if (this.stopped || this.ended) throw new ClientStoppedError();
    if (!this.conn) throw new NotConnectedError();
    try {
      return await this.conn.call(method, params);
    } catch (err) {
      throw sessionEnded(err);
    }
  }

  /** Connects and serves until a terminal error, with which it rejects. Call it once. */
  async run(): Promise<never> {
    let err: Error;
    try {
      err = await this.loop();
    } catch (e) {
      err = e instanceof Error ? e : new Error(String(e));
    }
    this.err = err;
    this.ended = true;
    this.stopped = true;
    for (const id of [...this.sessions.keys()]) this.dropSession(id);
    this.turns.stop();
    throw err;
  }

  private emit(e: ExecutorEvent): void {
    try {
      this.opts.onEvent?.(e);
    } catch (x) {
      this.log(`onEvent failed: ${errorText(x)}`);
    }
  }

  private async loop(): Promise<Error> {
    let failures = 0;
    let refusals = 0;
    let last: unknown;
    for (;;) {
      if (this.stopped) return new ClientStoppedError();
      this.emit({ type: 'connecting', attempt: failures + 1, error: last });
      const { registered, err } = await this.connectOnce();
      if (registered) failures = refusals = 0;
      if (this.stopped) return new ClientStoppedError();
      this.emit({ type: 'disconnected', error: err });
      const code = closeCodeOf(err);
      const re = rpcErrorOf(err);
      if (err instanceof CredentialRejectedError) return err;
      if (code === CloseCode.Replaced) return new ReplacedError(err instanceof ConnectionClosedError ? err.reason : '');
      if (code === CloseCode.UnsupportedProtocol || re?.code === ErrorCode.UnsupportedProtocol) {
        return new ClientStoppedError(`client stopped: unsupported protocol: ${errorText(err)}`, { closeCode: CloseCode.UnsupportedProtocol, cause: err });
      }
      if (code === CloseCode.RegistrationRefused || re?.code === ErrorCode.CapabilityUnavailable) {
        refusals++;
        this.log(`executor registration refused (${refusals}): ${errorText(err)}`);
        if (refusals >= this.opts.maxRefusedRegistrations) return new RegistrationRefusedError(err);
      }
      if (code === CloseCode.TokenExpired) {
        this.token = null;
        if (registered) {
          last = err;
          continue; // refresh and reconnect at once
        }
      }
      last = err;
      failures++;
      if (this.opts.maxReconnectAttempts > 0 && failures > this.opts.maxReconnectAttempts) {
        return new ReconnectExhaustedError(failures, err);
      }
      const delay = reconnectDelay(failures, this.opts.backoffMinMs, this.opts.backoffMaxMs);
      this.log(`executor disconnected (${errorText(err)}); reconnecting in ${delay} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wakeSleep = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wakeSleep = null;
    }
  }

  private async getToken(): Promise<Token> {
    const t = this.token;
    if (t && (!t.expiresAt || Date.parse(t.expiresAt) - Date.now() > 30_000)) return t;
    const fresh = this.opts.tokenSource ? await this.opts.tokenSource() : await this.exchange();
    if (!fresh.url) fresh.url = connectURL(this.opts.url);
    this.token = fresh;
    return fresh;
  }

  /** POST /v1/executor/tokens with the environment key or machine token. */
  private async exchange(): Promise<Token> {
    const credential = this.opts.environmentKey || this.opts.machineToken || '';
    const res = await fetch(this.opts.url.replace(/\/+$/, '') + '/v1/executor/tokens', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + credential, 'Content-Type': 'application/json' },
      body: JSON.stringify({ executor: this.info }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = (await res.text()).slice(0, 1 << 20);
    if (res.status === 401 || res.status === 403) {
      let message = '';
      try {
        message = JSON.parse(text)?.error?.message ?? '';
      } catch {
        /* not an error envelope */
      }
      throw new CredentialRejectedError(res.status, message);
    }
    if (res.status !== 200) throw new Error(`token endpoint answered ${res.status}`);
    const body = JSON.parse(text) as { token?: string; expires_at?: string; url?: string };
    if (!body.token) throw new Error('malformed token response');
    return { token: body.token, expiresAt: body.expires_at, url: body.url };
  }

  private dial(tok: Token): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(tok.url!, SUBPROTOCOL, {
        headers: { Authorization: 'Bearer ' + tok.token },
        maxPayload: this.opts.maxFrameBytes,
        handshakeTimeout: 30_000,
      });
      this.dialing = ws;
      ws.once('open', () => {
        ws.removeAllListeners('error');
        resolve(ws);
      });
      ws.once('unexpected-response', (_req, res) => {
        if (res.statusCode === 401) this.token = null;
        ws.terminate();
        reject(new Error(`connect: server answered ${res.statusCode}`));
      });
      ws.once('error', (e) => reject(new Error(`connect: ${errorText(e)}`)));
      ws.once('close', (code, reason) => reject(new ConnectionClosedError(code, reason.toString())));
    });
  }

  /** Gets a token, connects, registers and serves until the connection ends. */
  private async connectOnce(): Promise<{ registered: boolean; err: unknown }> {
    let ws: WebSocket;
    try {
      ws = await this.dial(await this.getToken());
    } catch (err) {
      return { registered: false, err };
    } finally {
      this.dialing = null;
    }
    if (this.stopped) {
      ws.close(1000, 'executor stopped');
      return { registered: false, err: new ClientStoppedError() };
    }
    const conn: RpcConn = new RpcConn(ws, (m, p, r) => this.handle(conn, m, p, r), this.opts.requestTimeoutMs, this.log);
    const held = this.held();
    let res: { executor_id?: string; heartbeat_interval_ms?: number; resumed?: string[]; lost?: { session_id: string }[]; features?: string[] };
    try {
      res = (await conn.call('executor.register', {
        protocol: this.protocol,
        executor: this.info,
        capabilities: this.caps,
        max_sessions: this.opts.maxSessions,
        sessions: held,
      })) as typeof res;
    } catch (err) {
      let out = err;
      if (err instanceof RpcError) {
        // A refusal may be followed by its close code: let it arrive.
        const closed = await Promise.race([conn.closed, sleep(2000).then(() => null)]);
        if (closed) out = new ConnectionClosedError(closed.closeCode, closed.reason, { cause: err });
      }
      conn.close(1000, 'registration failed');
      return { registered: false, err: out };
    }
    this.dropLost(res.lost ?? [], held);
    this.conn = conn;
    this.inAck = (res.features ?? []).includes('result_in_ack');
    this.unproven = 0;
    if (this.stopped) conn.close(1000, 'executor stopped');
    this.emit({ type: 'registered', executorId: res.executor_id ?? '', resumed: res.resumed ?? [], lost: (res.lost ?? []).map((l) => l.session_id) });
    const interval = res.heartbeat_interval_ms && res.heartbeat_interval_ms > 0 ? res.heartbeat_interval_ms : 10_000;
    const beats = this.heartbeats(conn, interval);
    void this.sendResults(conn);
    const closeErr = await conn.closed;
    this.turns.lost(conn);
    if (this.conn === conn) this.conn = null;
    await beats;
    return { registered: true, err: closeErr };
  }

  private held(): { session_id: string; lease_id: string }[] {
    return [...this.sessions.values()].map((s) => ({ session_id: s.a.session_id, lease_id: s.a.lease_id }));
  }

  /** Ends the sessions the harness reported lost, of those held as sent. */
  private dropLost(lost: { session_id: string }[], held: { session_id: string; lease_id: string }[]): void {
    const sent = new Map(held.map((h) => [h.session_id, h.lease_id]));
    for (const l of lost) {
      const s = this.sessions.get(l.session_id);
      if (s && s.a.lease_id === sent.get(l.session_id)) this.dropSession(l.session_id);
    }
  }

  private dropSession(id: string): void {
    const s = this.sessions.get(id);
    if (!s) return;
    this.sessions.delete(id);
    s.closed = true;
    for (const c of s.calls.values()) c.abort(new Error('session released'));
    for (const [callId, e] of this.outbox) if (e.r.session_id === id) this.dropResult(callId);
    try {
      this.opts.onRelease?.(id);
    } catch (x) {
      this.log(`onRelease failed: ${errorText(x)}`);
    }
    this.emit({ type: 'session_released', sessionId: id });
  }

  private dropResult(id: string): void {
    const e = this.outbox.get(id);
    if (e && e.acked && e.ackConn === this.conn && this.conn) this.unproven--;
    this.outbox.delete(id);
  }

  /** Renews the leases every interval, and early when results sent in acknowledgements pile up. */
  private async heartbeats(conn: RpcConn, interval: number): Promise<void> {
    let wake: (() => void) | null = null;
    void conn.closed.then(() => wake?.());
    while (!conn.isClosed) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(done, interval);
        function done() {
          clearTimeout(t);
          resolve();
        }
        wake = this.prove = done;
      });
      this.prove = null;
      if (conn.isClosed) return;
      const held = this.held();
      const sent = [...this.outbox].filter(([, e]) => e.acked && e.ackConn === conn).map(([id]) => id);
      let res: { lost?: { session_id: string }[] };
      try {
        res = (await conn.call('executor.heartbeat', { sessions: held })) as typeof res;
      } catch (err) {
        this.log(`heartbeat failed: ${errorText(err)}`);
        continue;
      }
      for (const id of sent) {
        const e = this.outbox.get(id);
        if (e && e.acked && e.ackConn === conn) this.dropResult(id);
      }
      this.dropLost(res.lost ?? [], held);
    }
  }

  /** Sends the results not yet acknowledged (calls that finished while disconnected). */
  private async sendResults(conn: RpcConn): Promise<void> {
    const batch = [...this.outbox.values()].filter((e) => e.ackConn !== conn).map((e) => e.r);
    for (const r of batch) {
      if (!(await this.deliver(conn, r))) return;
    }
  }

  /** Sends one tool.result; false if the connection failed (the result stays for a resend). */
  private async deliver(conn: RpcConn, r: OutboxEntry['r']): Promise<boolean> {
    try {
      await conn.call('tool.result', r);
    } catch (err) {
      if (!(err instanceof RpcError)) return false;
      this.log(`tool result ${r.tool_call_id} refused: ${err.message}`);
    }
    this.dropResult(r.tool_call_id);
    return true;
  }

  private handle(conn: RpcConn, method: string, params: unknown, reply: Reply | null): unknown {
    const p = (params ?? {}) as Record<string, any>;
    if (typeof params !== 'object' || params === null || Array.isArray(params)) {
      throw new RpcError(ErrorCode.InvalidParams, '', { detail: 'params must be an object' });
    }
    switch (method) {
      case 'session.assign':
        return this.assign(p as Assignment);
      case 'session.release': {
        const s = this.sessions.get(p.session_id);
        if (s && (!p.lease_id || s.a.lease_id === p.lease_id)) this.dropSession(p.session_id);
        return {};
      }
      case 'tool.call':
        return this.toolCall(conn, p, reply);
      case 'tool.cancel': {
        const c = this.sessions.get(p.session_id)?.calls.get(p.tool_call_id);
        if (c) {
          this.emit({ type: 'tool_canceled', sessionId: p.session_id, toolCallId: p.tool_call_id, reason: String(p.reason ?? '') });
          c.abort(new Error('canceled'));
        }
        return {};
      }
      case 'turn.start':
        return this.turns.start(conn, p).then((res) => {
          this.emit({ type: 'turn_started', sessionId: p.session_id, turnId: p.turn_id });
          return res;
        });
      case 'turn.cancel':
        return this.turns.cancel(p);
      case 'executor.close':
        this.log(`harness is closing the connection: ${p.code} ${p.reason}`);
        return {};
      case 'process.start':
      case 'process.signal':
        throw new RpcError(ErrorCode.CapabilityUnavailable, '', { capability: 'process' });
      case 'terminal.open':
      case 'terminal.input':
      case 'terminal.resize':
      case 'terminal.close':
        throw new RpcError(ErrorCode.CapabilityUnavailable, '', { capability: 'process.pty', terminal_code: 'pty_unavailable' });
    }
    throw new RpcError(ErrorCode.MethodNotFound);
  }

  /** Answers session.assign: accepted, or a refusal reported as a session_rejected event. */
  private async assign(a: Assignment): Promise<unknown> {
    if (!a.session_id || !a.lease_id) {
      throw new RpcError(ErrorCode.InvalidParams, '', { detail: 'session_id and lease_id are required' });
    }
    try {
      await this.admit(a);
    } catch (err) {
      const rejected =
        err instanceof AssignRejectedError
          ? err
          : new AssignRejectedError((err instanceof RpcError && err.reason) || 'workspace_unavailable', err instanceof RpcError ? err.message : errorText(err));
      this.log(`session ${a.session_id} refused: ${rejected.message}`);
      this.emit({ type: 'session_rejected', sessionId: a.session_id, error: rejected });
      return { accepted: false, reason: rejected.reason, ...(rejected.detail ? { message: rejected.detail } : {}) };
    }
    return { accepted: true };
  }

  /** Takes a session, or throws why not. */
  private async admit(a: Assignment): Promise<void> {
    for (const t of a.tools ?? []) {
      if (!this.caps.includes('tool:' + t)) throw new AssignRejectedError('session_rejected', `tool ${t} is not served here`);
    }
    const existing = this.sessions.get(a.session_id);
    if (existing) {
      existing.a = a; // a new lease for a session already here
      return;
    }
    const busy = () => this.stopped || this.sessions.size >= this.opts.maxSessions || this.sessions.has(a.session_id);
    if (busy()) throw new AssignRejectedError('executor_busy', `at max_sessions (${this.opts.maxSessions})`);
    let cwd = '';
    if (this.opts.workspace) {
      if (!/^[A-Za-z0-9_-]+$/.test(a.session_id)) throw new AssignRejectedError('session_rejected', 'the session id is not usable as a directory name');
      cwd = path.join(this.opts.workspace, a.session_id);
      await mkdir(cwd, { recursive: true, mode: 0o700 });
    }
    await this.opts.onAssign?.(a);
    if (busy()) throw new AssignRejectedError('executor_busy', `at max_sessions (${this.opts.maxSessions})`);
    this.sessions.set(a.session_id, { a, cwd, calls: new Map(), seen: new Set(), closed: false });
    this.emit({ type: 'session_assigned', sessionId: a.session_id });
  }

  /**
   * Starts a tool call. With result_in_ack the acknowledgement waits up to
   * 20 ms and carries the result (or the handler's RpcError) of a call that
   * finished by then; otherwise the result follows as tool.result.
   */
  private toolCall(conn: RpcConn, p: Record<string, any>, reply: Reply | null): unknown {
    if (!p.tool_call_id || !p.name) throw new RpcError(ErrorCode.InvalidParams, '', { detail: 'tool_call_id and name are required' });
    const s = this.sessions.get(p.session_id);
    if (!s) throw new RpcError(ErrorCode.SessionNotActive, '', { detail: 'the session is not assigned to this executor' });
    if (s.a.lease_id !== p.lease_id) throw new RpcError(ErrorCode.LeaseExpired, '', { detail: 'the lease is not current' });
    const tools = this.opts.tools ?? {};
    const handler = Object.hasOwn(tools, p.name) ? tools[p.name] : undefined;
    if (!this.caps.includes('tool:' + p.name) || !handler) {
      throw new RpcError(ErrorCode.CapabilityUnavailable, '', { capability: 'tool:' + p.name, detail: `tool ${p.name} is not declared` });
    }
    if (s.seen.has(p.tool_call_id) || s.calls.has(p.tool_call_id) || s.closed || this.outbox.has(p.tool_call_id)) {
      return { accepted: true }; // running or done: never run twice
    }
    if (this.running >= this.opts.maxConcurrentCalls) {
      throw new RpcError(ErrorCode.ExecutorBusy, '', { detail: 'too many tool calls in flight' });
    }
    this.running++;
    s.seen.add(p.tool_call_id);
    if (s.seen.size > MAX_SEEN_CALLS) s.seen.delete(s.seen.values().next().value!);
    const ac = new AbortController();
    s.calls.set(p.tool_call_id, ac);
    let timeout: NodeJS.Timeout | undefined;
    if (typeof p.timeout_ms === 'number' && p.timeout_ms > 0) {
      timeout = setTimeout(() => ac.abort(new TimeoutError()), p.timeout_ms);
    }
    const inAck = this.inAck && this.conn === conn && reply !== null;
    let answered = !inAck;
    let ackTimer: NodeJS.Timeout | undefined;
    if (inAck) {
      ackTimer = setTimeout(() => {
        if (!answered) {
          answered = true;
          reply!.send({ accepted: true });
        }
      }, RESULT_IN_ACK_WINDOW_MS);
    }
    void this.runTool(s, p, handler, ac.signal).then((out) => {
      clearTimeout(timeout);
      s.calls.delete(p.tool_call_id);
      this.running--;
      if ('error' in out && !answered) {
        answered = true;
        clearTimeout(ackTimer);
        s.seen.delete(p.tool_call_id); // not accepted: the same call sent again runs
        reply!.send(undefined, out.error); // no result: the error is the answer
        return;
      }
      const result = 'error' in out ? errorResult(out.error) : out.result;
      this.emit({ type: 'tool_finished', sessionId: p.session_id, toolCallId: p.tool_call_id, tool: p.name, result });
      if (this.sessions.get(p.session_id) !== s) return;
      // The result stays in the outbox until acknowledged, so that it is
      // sent again after a reconnect.
      const e: OutboxEntry = { r: { session_id: p.session_id, tool_call_id: p.tool_call_id, ...result }, ackConn: null, acked: false };
      this.outbox.set(p.tool_call_id, e);
      if (!answered) {
        answered = true;
        clearTimeout(ackTimer);
        if (reply!.send({ accepted: true, result })) {
          e.ackConn = conn;
          e.acked = true;
          if (this.conn === conn && ++this.unproven >= MAX_UNPROVEN) this.prove?.();
          return;
        }
      }
      if (this.conn) void this.deliver(this.conn, e.r);
    });
    return inAck ? deferred : { accepted: true };
  }

  private async runTool(s: SessionState, p: Record<string, any>, handler: ToolHandler, signal: AbortSignal): Promise<CallOutcome> {
    this.emit({ type: 'tool_started', sessionId: p.session_id, toolCallId: p.tool_call_id, tool: p.name });
    const ctx: ToolContext = {
      sessionId: p.session_id,
      toolCallId: p.tool_call_id,
      signal,
      env: { ...(s.a.env ?? {}) },
      cwd: s.cwd,
      readOnly: !!s.a.workspace?.read_only,
    };
    try {
      const out = await handler(p.input ?? {}, ctx);
      const result: ToolResult = typeof out === 'string' ? { content: [{ type: 'text', text: out }] } : { ...out, content: out?.content ?? [] };
      if (signal.aborted && !result.is_error) return { result: cancelResult(signal) };
      return { result };
    } catch (err) {
      if (signal.aborted) return { result: cancelResult(signal) };
      if (err instanceof RpcError) return { error: err };
      return { result: { content: [{ type: 'text', text: errorText(err) }], is_error: true } };
    }
  }
}

class TimeoutError extends Error {
  constructor() {
    super('the tool call timed out');
    this.name = 'TimeoutError';
  }
}

function cancelResult(signal: AbortSignal): ToolResult {
  if (signal.reason instanceof TimeoutError) {
    return { content: [{ type: 'text', text: 'the tool call timed out' }], is_error: true, error_code: 'timeout' };
  }
  return { content: [{ type: 'text', text: 'the tool call was canceled' }], is_error: true, error_code: 'canceled' };
}

/** The tool result of an RpcError thrown after the call was acknowledged. */
function errorResult(e: RpcError): ToolResult {
  return { content: [{ type: 'text', text: e.message }], is_error: true, error_code: e.reason || codeMessage(e.code) || String(e.code) };
}

/** The WebSocket connect URL of a server's base URL. */
export function connectURL(base: string): string {
  let b = base.replace(/\/+$/, '').replace(/\/v1\/executor\/connect$/, '');
  if (b.startsWith('https://')) b = 'wss://' + b.slice(8);
  else if (b.startsWith('http://')) b = 'ws://' + b.slice(7);
  return b + '/v1/executor/connect';
}

/** The delay before reconnect attempt n (1-based): uniform in [0, min(max, min·2^(n-1))]. */
export function reconnectDelay(n: number, minMs: number, maxMs: number): number {
  const cap = Math.min(maxMs, minMs * 2 ** Math.min(n - 1, 30));
  return Math.floor(Math.random() * cap);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}
