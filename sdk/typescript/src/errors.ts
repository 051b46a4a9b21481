// Errors of the executor protocol (reins.executor.v1): JSON-RPC error codes
// and data, close codes, and the typed errors a client ends with.

/** JSON-RPC error codes of reins.executor.v1. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  Unauthorized: -32000,
  Forbidden: -32001,
  NotFound: -32002,
  LeaseExpired: -32003,
  Timeout: -32004,
  Canceled: -32005,
  PayloadTooLarge: -32006,
  SessionNotActive: -32007,
  McpUnavailable: -32008,
  ExecutorBusy: -32009,
  UnsupportedProtocol: -32010,
  ResourceUnavailable: -32011,
  CapabilityUnavailable: -32012,
  Conflict: -32013,
} as const;

const codeNames: Record<number, string> = {
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

/** The protocol's message for a code ("payload_too_large" for -32006), or "". */
export function codeMessage(code: number): string {
  return codeNames[code] ?? '';
}

/** Close codes with which the harness ends an executor connection. */
export const CloseCode = {
  /** The executor token expired: refresh it and reconnect at once. */
  TokenExpired: 4001,
  /** Registration refused (cloud environment, missing capability). */
  RegistrationRefused: 4002,
  /** Terminal: the protocol version is not spoken. */
  UnsupportedProtocol: 4003,
  /** Terminal: a newer connection with the same identity took over. */
  Replaced: 4004,
  /** The harness node is shutting down: reconnect with backoff. */
  Drained: 4005,
} as const;

/**
 * Whether a connection closed with `code` ends the client for good instead
 * of reconnecting: 4003 (unsupported protocol) and 4004 (replaced).
 */
export function isTerminalCloseCode(code: number): boolean {
  return code === CloseCode.UnsupportedProtocol || code === CloseCode.Replaced;
}

/** The data member of a JSON-RPC error. Receivers keep fields they do not know. */
export interface JsonRpcErrorData {
  /** A capacity or timeout failure the caller should retry with backoff. */
  retryable?: boolean;
  detail?: string;
  /** The missing capability of a -32012 error ("tool:read", "process.pty"). */
  capability?: string;
  /** Machine-readable cause from an open set ("workspace_unavailable", …). */
  reason?: string;
  terminal_code?: string;
  expected_sequence?: number;
  [key: string]: unknown;
}

/** The wire form of a JSON-RPC error. */
export interface JsonRpcError {
  code: number;
  message: string;
  data?: JsonRpcErrorData;
}

const retryableCodes = new Set<number>([ErrorCode.Timeout, ErrorCode.ExecutorBusy, ErrorCode.ResourceUnavailable]);

/**
 * A JSON-RPC error returned by the peer, or thrown by a handler to answer
 * with a specific code and data. A handler that throws it keeps its code on
 * the wire; any other exception is answered -32603 internal_error.
 */
export class RpcError extends Error {
  readonly code: number;
  readonly data?: JsonRpcErrorData;

  /**
   * An empty message becomes the code's protocol message. Codes the
   * protocol marks retryable (-32004, -32009, -32011) get
   * `data.retryable = true` unless `data` says otherwise.
   */
  constructor(code: number, message = '', data?: JsonRpcErrorData) {
    super(message || codeMessage(code) || `error ${code}`);
    this.name = 'RpcError';
    this.code = code;
    if (retryableCodes.has(code) && data?.retryable === undefined) {
      data = { retryable: true, ...data };
    }
    this.data = data;
  }

  /** An error whose data.reason is `reason`: a refusal with a machine-readable cause. */
  static withReason(code: number, reason: string, message: string): RpcError {
    return new RpcError(code, message, { reason });
  }

  /** Builds an error from its wire form. */
  static fromJSON(e: JsonRpcError): RpcError {
    return new RpcError(e.code, e.message, e.data ?? undefined);
  }

  /** data.retryable, or undefined when the peer did not say. */
  get retryable(): boolean | undefined {
    return this.data?.retryable;
  }

  /** data.reason, or undefined. */
  get reason(): string | undefined {
    return this.data?.reason;
  }

  /** The JSON-RPC error object sent on the wire. */
  toJSON(): JsonRpcError {
    const out: JsonRpcError = { code: this.code, message: this.message };
    if (this.data !== undefined) out.data = this.data;
    return out;
  }
}

// Client errors: the executor end.

/** A call was attempted while the channel is not open (yet, or any more). */
export class NotConnectedError extends Error {
  constructor(message = 'executor channel is not connected') {
    super(message);
    this.name = 'NotConnectedError';
  }
}

/**
 * The client was stopped, or closed with a terminal close code (4003, or
 * 4004 as its subclass {@link ReplacedError}). `closeCode` is that code.
 */
export class ClientStoppedError extends Error {
  readonly closeCode?: number;
  constructor(message = 'client stopped', options?: { closeCode?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ClientStoppedError';
    this.closeCode = options?.closeCode;
  }
}

/**
 * The harness closed the connection with 4004: another executor registered
 * with the same identity (environment and name) and this one must stop.
 */
export class ReplacedError extends ClientStoppedError {
  constructor(reason = '') {
    super(`executor connection was replaced (4004)${reason ? ': ' + reason : ''}`, { closeCode: CloseCode.Replaced });
    this.name = 'ReplacedError';
  }
}

/** A request got no response before its deadline. */
export class RequestTimeoutError extends Error {
  readonly method: string;
  constructor(method: string) {
    super(`request ${method} timed out`);
    this.name = 'RequestTimeoutError';
    this.method = method;
  }
}

/** `maxReconnectAttempts` reconnects failed in a row; `cause` is the last failure. */
export class ReconnectExhaustedError extends Error {
  readonly attempts: number;
  constructor(attempts: number, cause: unknown) {
    super(`executor reconnect attempts exhausted after ${attempts} attempts: ${errorText(cause)}`, { cause });
    this.name = 'ReconnectExhaustedError';
    this.attempts = attempts;
  }
}

/**
 * The token endpoint answered 401 or 403: the environment key or machine
 * token is invalid, revoked, or its environment archived. Not retried.
 */
export class CredentialRejectedError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(`executor credential rejected: token endpoint answered ${status}${message ? ': ' + message : ''}`);
    this.name = 'CredentialRejectedError';
    this.status = status;
  }
}

/**
 * The harness refused the registration `maxRefusedRegistrations` times in a
 * row (close 4002, or -32012 to executor.register): a configuration error
 * reconnecting cannot fix. `cause` is the last refusal.
 */
export class RegistrationRefusedError extends Error {
  constructor(cause: unknown) {
    super(`executor registration refused: ${errorText(cause)}`, { cause });
    this.name = 'RegistrationRefusedError';
  }
}

// Harness errors: the harness end of the protocol reports these; the
// executor client never throws them, but they are part of the SDK's surface.

/** A request on a session that has ended. */
export class SessionEndedError extends Error {
  constructor() {
    super('session ended');
    this.name = 'SessionEndedError';
  }
}

/**
 * The executor was lost (lease expiry, executor.close, session ended, or a
 * restarted executor that no longer reports the session) before tool.result
 * arrived: the tool may or may not have run.
 */
export class ToolOutcomeUnknownError extends Error {
  constructor() {
    super('tool outcome unknown: executor lost before tool.result');
    this.name = 'ToolOutcomeUnknownError';
  }
}

/** session.assign answered accepted=false. */
export class AssignRejectedError extends Error {
  constructor() {
    super('executor rejected session.assign');
    this.name = 'AssignRejectedError';
  }
}

/** A connection ended with a WebSocket close frame. */
export class ConnectionClosedError extends Error {
  readonly closeCode: number;
  readonly reason: string;
  constructor(code: number, reason: string, options?: { cause?: unknown }) {
    super(`connection closed with ${code}${reason ? ' ' + JSON.stringify(reason) : ''}`, options);
    this.name = 'ConnectionClosedError';
    this.closeCode = code;
    this.reason = reason;
  }
}

/** The close code carried by err, or -1. */
export function closeCodeOf(err: unknown): number {
  for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause) {
    const c = (e as { closeCode?: unknown }).closeCode;
    if (typeof c === 'number') return c;
  }
  return -1;
}

export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The RpcError carried by err or its causes, or undefined. */
export function rpcErrorOf(err: unknown): RpcError | undefined {
  for (let e: unknown = err; e instanceof Error; e = (e as Error & { cause?: unknown }).cause) {
    if (e instanceof RpcError) return e;
  }
  return undefined;
}
