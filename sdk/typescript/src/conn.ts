// One JSON-RPC 2.0 connection over a WebSocket: requests in both
// directions, answered by id.

import WebSocket from 'ws';
import { ConnectionClosedError, ErrorCode, RpcError, RequestTimeoutError, errorText } from './errors.js';

/** Handles a request or notification; its return value is the result. */
export type RequestHandler = (method: string, params: unknown, reply: Reply | null) => unknown | Promise<unknown>;

/**
 * Reply lets a handler answer later: a handler that returns {@link deferred}
 * answers through it instead.
 */
export interface Reply {
  /** Sends the result or error; false if it was not written (connection gone, or answered already). */
  send(result: unknown, error?: RpcError): boolean;
}

/** Returned by a handler that answers through its Reply. */
export const deferred = Symbol('deferred');

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

export class RpcConn {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closeErr: ConnectionClosedError | null = null;
  /** Resolves with the close error when the connection ends. */
  readonly closed: Promise<ConnectionClosedError>;
  private resolveClosed!: (e: ConnectionClosedError) => void;

  constructor(
    private readonly ws: WebSocket,
    private readonly handler: RequestHandler,
    private readonly requestTimeoutMs: number,
    private readonly log: (msg: string) => void,
  ) {
    this.closed = new Promise((r) => (this.resolveClosed = r));
    ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    ws.on('close', (code, reason) => this.onClose(code, reason.toString()));
    ws.on('error', (err) => this.log(`websocket error: ${errorText(err)}`));
  }

  get isClosed(): boolean {
    return this.closeErr !== null;
  }

  /** Sends a request and resolves with its result; rejects with RpcError, RequestTimeoutError or ConnectionClosedError. */
  call(method: string, params: unknown, timeoutMs = this.requestTimeoutMs): Promise<unknown> {
    if (this.closeErr) return Promise.reject(this.closeErr);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RequestTimeoutError(method));
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      this.write({ jsonrpc: '2.0', id, method, params });
    });
  }

  /** Sends a notification. */
  notify(method: string, params: unknown): void {
    this.write({ jsonrpc: '2.0', method, params });
  }

  /** Closes the connection with code and reason. */
  close(code: number, reason: string): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.close(code, reason);
      // A peer that never answers the close frame must not hold us.
      setTimeout(() => this.ws.terminate(), 2000).unref();
    }
  }

  private write(msg: unknown): boolean {
    if (this.closeErr || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(msg));
    return true;
  }

  private onClose(code: number, reason: string): void {
    if (this.closeErr) return;
    this.closeErr = new ConnectionClosedError(code, reason);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(this.closeErr);
    }
    this.pending.clear();
    this.resolveClosed(this.closeErr);
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(isBinary ? data.toString('utf8') : data.toString());
    } catch {
      this.write({ jsonrpc: '2.0', id: null, error: new RpcError(ErrorCode.ParseError).toJSON() });
      return;
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg) || msg.jsonrpc !== '2.0') {
      this.write({ jsonrpc: '2.0', id: null, error: new RpcError(ErrorCode.InvalidRequest).toJSON() });
      return;
    }
    const id = msg.id;
    if (typeof msg.method === 'string') {
      this.onRequest(msg.method, msg.params, id === undefined ? undefined : (id as number | string | null));
      return;
    }
    if (typeof id === 'number' && ('result' in msg || 'error' in msg)) {
      const p = this.pending.get(id);
      if (!p) return; // answered after its timeout
      this.pending.delete(id);
      clearTimeout(p.timer);
      if (msg.error && typeof msg.error === 'object') {
        p.reject(RpcError.fromJSON(msg.error as never));
      } else {
        p.resolve(msg.result);
      }
      return;
    }
    this.write({ jsonrpc: '2.0', id: id ?? null, error: new RpcError(ErrorCode.InvalidRequest).toJSON() });
  }

  private onRequest(method: string, params: unknown, id: number | string | null | undefined): void {
    let answered = false;
    const reply: Reply | null =
      id === undefined
        ? null
        : {
            send: (result, error) => {
              if (answered) return false;
              answered = true;
              return error
                ? this.write({ jsonrpc: '2.0', id, error: error.toJSON() })
                : this.write({ jsonrpc: '2.0', id, result: result ?? {} });
            },
          };
    let out: unknown;
    try {
      out = this.handler(method, params, reply);
    } catch (e) {
      out = Promise.reject(e);
    }
    Promise.resolve(out).then(
      (result) => {
        if (reply && result !== deferred) reply.send(result);
      },
      (e) => {
        if (!reply) return;
        if (e instanceof RpcError) {
          reply.send(undefined, e);
        } else {
          this.log(`handler for ${method} failed: ${errorText(e)}`);
          reply.send(undefined, new RpcError(ErrorCode.InternalError, '', { detail: errorText(e) }));
        }
      },
    );
  }
}
