// The agent end of reins.executor.v1 (capability "agent"): an external
// agent loop ("brain") that runs a session's turns while reins keeps the
// log, the API and the permissions. docs/executor.md ("Agent ends") in the
// reins repository describes the methods.

import { randomUUID } from 'node:crypto';
import type { RpcConn } from './conn.js';
import {
  ErrorCode,
  RpcError,
  SessionEndedError,
  ToolCallHttpError,
  ToolOutcomeUnknownError,
  errorText,
  sessionEnded,
} from './errors.js';
import type { ContentBlock } from './client.js';

/** A short-lived credential of a turn: a model token (model gateway) or a tools token (platform tools endpoint). */
export interface TokenGrant {
  /** Set on a model grant ("anthropic", "openai"). */
  provider?: string;
  model?: string;
  /** The model gateway's base URL (a model grant). */
  base_url?: string;
  /** The platform tools endpoint (a tools grant). */
  url?: string;
  token: string;
  /** ISO 8601. */
  expires_at: string;
}

/** turn.start: everything an agent loop needs to run one turn of a session. */
export interface TurnStart {
  session_id: string;
  turn_id: string;
  /** The events that start the turn (user.message, user.custom_tool_result, user.tool_confirmation), as the API shows them. */
  inputs: Record<string, any>[];
  /** The session's log before the inputs, as the API shows it (always whole: this SDK does not declare transcript_deltas). */
  transcript?: Record<string, any>[];
  /** The session's agent (model, system, tools, mcp_servers), as the API shows it. */
  agent?: Record<string, any>;
  model?: TokenGrant;
  tools?: TokenGrant;
}

/** A call of the platform tools endpoint: a built-in tool of the session's agent, run by reins on the session's hands. */
export interface PlatformToolCall {
  name: string;
  input?: unknown;
  /** Makes a retried call safe: the same key with the same call answers the first outcome. Default: a new random key. */
  idempotencyKey?: string;
  /** The tool_call_id of an earlier call that answered approval_required and that the user has confirmed since. */
  approval?: string;
}

/** The outcome of a platform tool call; a refusal is a result with `is_error` and an `error_code`. */
export interface PlatformToolResult {
  /** The agent.tool_use the call recorded ("" when none). */
  tool_call_id: string;
  status: 'completed' | 'in_progress' | string;
  content: ContentBlock[];
  is_error?: boolean;
  error_code?: string;
}

/** Runs one turn; `turn.signal` is aborted on turn.cancel (an interrupt) and when the connection is lost. */
export type AgentHandler = (turn: Turn) => void | Promise<void>;

/** The event an agent end appends last in a turn. */
export const EVENT_TURN_END = 'turn.end';

/** A tools token that expires sooner than this is refreshed before a call. */
const TOOLS_REFRESH_MARGIN_MS = 30_000;
/** Attempts of a platform tool call whose request failed on the way (the same idempotency key each time). */
const TOOL_CALL_ATTEMPTS = 3;

/** One turn on the agent end. */
export class Turn {
  readonly start: TurnStart;
  /** Aborted on turn.cancel (reason "interrupt") and when the connection that started the turn ends. */
  readonly signal: AbortSignal;
  private next = 0;
  private queue: Promise<unknown> = Promise.resolve();

  /** @internal */
  constructor(
    start: TurnStart,
    private readonly conn: RpcConn,
    signal: AbortSignal,
  ) {
    this.start = start;
    this.signal = signal;
  }

  get sessionId(): string {
    return this.start.session_id;
  }

  get turnId(): string {
    return this.start.turn_id;
  }

  /** The sequence the next send uses. */
  get nextSequence(): number {
    return this.next;
  }

  /**
   * Appends events (agent.message, agent.thinking, agent.custom_tool_use,
   * span.* and last {@link EVENT_TURN_END}) with the next sequence
   * (session.event). Sends are made one at a time, in call order. A
   * -32013 conflict (a sequence the harness did not expect: a gap, or a
   * batch it already has) rejects with that RpcError and the next send
   * continues from its `expected_sequence`, so a send whose answer was lost
   * may be retried safely. A turn that is no longer running rejects with
   * {@link SessionEndedError} (reason `turn_inactive`).
   */
  send(...events: object[]): Promise<void> {
    const run = async () => {
      try {
        const res = (await this.conn.call('session.event', {
          session_id: this.sessionId,
          turn_id: this.turnId,
          sequence: this.next,
          events,
        })) as { next_sequence?: number };
        if (typeof res?.next_sequence === 'number') this.next = res.next_sequence;
      } catch (err) {
        const expected = err instanceof RpcError && err.code === ErrorCode.Conflict ? err.data?.expected_sequence : undefined;
        if (typeof expected === 'number') this.next = expected;
        throw sessionEnded(err);
      }
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }

  /** Appends the end of the turn. */
  endTurn(): Promise<void> {
    return this.send({ type: EVENT_TURN_END });
  }

  /**
   * A fresh model token (model_token.refresh); `start.model` becomes it.
   * Refusals: SessionEndedError (turn_inactive), RpcError (forbidden,
   * model_token_unavailable).
   */
  async refreshModelToken(): Promise<TokenGrant> {
    const g = await this.refresh('model_token.refresh');
    this.start.model = { ...this.start.model, ...g };
    return this.start.model;
  }

  /** A fresh tools token (tools_token.refresh); `start.tools` becomes it. Refusals as {@link refreshModelToken}, with tools_token_unavailable. */
  async refreshToolsToken(): Promise<TokenGrant> {
    const g = await this.refresh('tools_token.refresh');
    this.start.tools = { ...this.start.tools, ...g, url: g.url || this.start.tools?.url };
    return this.start.tools;
  }

  private async refresh(method: string): Promise<TokenGrant> {
    try {
      return (await this.conn.call(method, { session_id: this.sessionId, turn_id: this.turnId })) as TokenGrant;
    } catch (err) {
      throw sessionEnded(err);
    }
  }

  /**
   * Runs a built-in tool of the session's agent through the platform tools
   * endpoint (POST /v1/sessions/{id}/tool_calls) with the turn's tools
   * token, refreshed when it is about to expire or answered 401, and an
   * Idempotency-Key; it waits while the call is `in_progress`. A refused
   * call is a result with `error_code` (permission_denied,
   * approval_required, environment_unavailable, …). Rejects with
   * {@link ToolCallHttpError} for a refused request,
   * {@link SessionEndedError} when the turn is no longer running (409
   * turn_inactive, or a refused refresh), {@link ToolOutcomeUnknownError}
   * when the endpoint gave no answer (call again with its key), or the
   * signal's reason when the turn is cancelled.
   */
  async callTool(call: PlatformToolCall): Promise<PlatformToolResult> {
    const key = call.idempotencyKey || randomUUID();
    const body = JSON.stringify({
      name: call.name,
      ...(call.input === undefined ? {} : { input: call.input }),
      ...(call.approval ? { approval: { tool_use_id: call.approval } } : {}),
    });
    let refreshed = false;
    let failures = 0;
    for (let wait = 50; ; wait = Math.min(2 * wait, 2000)) {
      this.signal.throwIfAborted();
      const grant = await this.toolsGrant(false);
      let res: Response;
      try {
        res = await fetch(grant.url!, {
          method: 'POST',
          headers: { Authorization: 'Bearer ' + grant.token, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
          body,
          signal: this.signal,
        });
      } catch (err) {
        this.signal.throwIfAborted();
        if (++failures >= TOOL_CALL_ATTEMPTS) throw new ToolOutcomeUnknownError({ idempotencyKey: key, cause: err });
        await sleep(wait, this.signal);
        continue;
      }
      const text = await res.text();
      if (res.status === 401 && !refreshed) {
        refreshed = true;
        await this.toolsGrant(true);
        continue;
      }
      if (res.status !== 200) throw httpError(res.status, text);
      const out = JSON.parse(text) as PlatformToolResult;
      if (out.status !== 'in_progress') return out;
      await sleep(wait, this.signal);
    }
  }

  /** The turn's tools grant, refreshed first when forced, missing or about to expire. */
  private async toolsGrant(force: boolean): Promise<TokenGrant> {
    const g = this.start.tools;
    if (!force && g?.url && Date.parse(g.expires_at) - Date.now() > TOOLS_REFRESH_MARGIN_MS) return g;
    return this.refreshToolsToken();
  }
}

/** The error of a non-200 answer of the tools endpoint. */
function httpError(status: number, text: string): Error {
  let type = '';
  let message = text.slice(0, 1000);
  try {
    const env = JSON.parse(text) as { error?: { type?: string; message?: string } };
    type = env.error?.type ?? '';
    message = env.error?.message ?? message;
  } catch {
    /* not an error envelope */
  }
  const e = new ToolCallHttpError(status, type, message);
  if (status === 409 && message.startsWith('turn_inactive')) return new SessionEndedError({ reason: 'turn_inactive', cause: e });
  return e;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      if (signal.aborted) reject(signal.reason);
      else resolve();
    }
  });
}

/** The turns running on a client, by turn id. */
export class AgentTurns {
  private readonly running = new Map<string, { ac: AbortController; conn: RpcConn }>();

  constructor(
    private readonly handler: AgentHandler | undefined,
    private readonly accept: ((start: TurnStart) => void | Promise<void>) | undefined,
    private readonly log: (msg: string) => void,
  ) {}

  /** Answers turn.start: the handler runs in the background. */
  async start(conn: RpcConn, p: Record<string, any>): Promise<unknown> {
    if (!this.handler) {
      throw new RpcError(ErrorCode.CapabilityUnavailable, '', { capability: 'agent', detail: 'this executor runs no agent loop' });
    }
    if (!p.session_id || !p.turn_id) throw new RpcError(ErrorCode.InvalidParams, '', { detail: 'session_id and turn_id are required' });
    const start: TurnStart = { ...p, inputs: p.inputs ?? [] } as TurnStart;
    if (this.accept) {
      try {
        await this.accept(start);
      } catch (err) {
        this.log(`turn ${start.turn_id} of session ${start.session_id} refused: ${errorText(err)}`);
        throw err;
      }
    }
    const ac = new AbortController();
    this.running.set(start.turn_id, { ac, conn });
    const turn = new Turn(start, conn, ac.signal);
    // After the acknowledgement goes out (this answer is written first).
    void new Promise((r) => setImmediate(r))
      .then(() => this.handler!(turn))
      .catch((err) => {
        if (!ac.signal.aborted) this.log(`agent turn ${start.turn_id} failed: ${errorText(err)}`);
      })
      .finally(() => {
        if (this.running.get(start.turn_id)?.ac === ac) this.running.delete(start.turn_id);
        ac.abort(new Error('the turn ended'));
      });
    return { accepted: true };
  }

  /** Answers turn.cancel. */
  cancel(p: Record<string, any>): unknown {
    this.running.get(p.turn_id)?.ac.abort(new TurnCanceledError(String(p.reason ?? '')));
    return {};
  }

  /** Aborts the turns started on a connection that ended (the harness fails them and starts them again). */
  lost(conn: RpcConn): void {
    for (const [id, t] of this.running) {
      if (t.conn !== conn) continue;
      this.running.delete(id);
      t.ac.abort(new TurnCanceledError('connection lost'));
    }
  }

  /** Aborts every turn (the client ended). */
  stop(): void {
    for (const t of this.running.values()) t.ac.abort(new TurnCanceledError('client stopped'));
    this.running.clear();
  }
}

/** The reason of an aborted `turn.signal`: turn.cancel ("interrupt"), a lost connection, or stop. */
export class TurnCanceledError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(`turn canceled${reason ? ': ' + reason : ''}`);
    this.name = 'TurnCanceledError';
    this.reason = reason;
  }
}
