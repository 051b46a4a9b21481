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
  /** The MCP server of a -32008 mcp_unavailable (a reins addition). */
  mcp_server_name?: string;
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

// Harness errors: what the Go SDK's harness end returns as
// ErrSessionEnded, ErrToolOutcomeUnknown and ErrAssignRejected. This SDK
// has no harness end; its executor and agent ends throw them in the same
// situations as seen from their side.

/**
 * A request on a session, or a turn, that has ended: the harness answered
 * -32007 session_not_active (for an agent end's turn, reason
 * `turn_inactive`), or the platform tools endpoint 409 turn_inactive.
 * `cause` is that answer ({@link RpcError} or {@link ToolCallHttpError});
 * `reason` its reason.
 */
export class SessionEndedError extends Error {
  readonly reason?: string;
  constructor(options?: { reason?: string; cause?: unknown }) {
    super(`session ended${options?.cause === undefined ? '' : ': ' + errorText(options.cause)}`,
      options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SessionEndedError';
    this.reason = options?.reason;
  }
}

/**
 * The outcome of a tool call is unknown: what ran it was lost before the
 * result arrived, and the tool may or may not have run. An agent end's
 * `callTool` throws it when the platform tools endpoint did not answer
 * (the connection failed after the request may have reached the server,
 * and so did the retries with the same idempotency key): calling again
 * with the same `idempotencyKey` returns the outcome without running the
 * tool twice. `idempotencyKey` is that key; `cause` the last failure.
 */
export class ToolOutcomeUnknownError extends Error {
  readonly idempotencyKey?: string;
  constructor(options?: { idempotencyKey?: string; cause?: unknown }) {
    super(`tool outcome unknown: executor lost before tool.result${options?.cause === undefined ? '' : ': ' + errorText(options.cause)}`,
      options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ToolOutcomeUnknownError';
    this.idempotencyKey = options?.idempotencyKey;
  }
}

/**
 * session.assign answered accepted=false. An executor's `onAssign` throws
 * it to refuse a session with a reason (default `session_rejected`); the
 * client reports every refusal of its own (a tool it does not serve, no
 * free slot, an unusable workspace) as a `session_rejected` event carrying
 * one.
 */
export class AssignRejectedError extends Error {
  /** The reason answered (default session_rejected). */
  readonly reason: string;
  /** The message answered with it. */
  readonly detail: string;
  constructor(reason?: string, detail = '') {
    super(`executor rejected session.assign${reason ? ': ' + reason : ''}${detail ? ': ' + detail : ''}`);
    this.name = 'AssignRejectedError';
    this.reason = reason || 'session_rejected';
    this.detail = detail;
  }
}

/**
 * A request the platform tools endpoint refused as a request: 400 (a bad
 * call), 401/403 (a token refused), 413 (too large). 409 turn_inactive is
 * a {@link SessionEndedError} whose cause is this.
 */
export class ToolCallHttpError extends Error {
  readonly status: number;
  readonly type: string;
  constructor(status: number, type: string, message: string) {
    super(`tools endpoint: ${status} ${type}: ${message}`);
    this.name = 'ToolCallHttpError';
    this.status = status;
    this.type = type;
  }
}

/** The refusal of an agent end's turn.start whose MCP server cannot be reached: -32008 with the session.error type. */
export function mcpUnavailable(server: string, cause: unknown): RpcError {
  return new RpcError(ErrorCode.McpUnavailable, '', {
    reason: 'mcp_connection_failed_error',
    mcp_server_name: server,
    retryable: true,
    detail: `MCP server ${server} cannot be reached: ${errorText(cause)}`,
  });
}

/** err as a SessionEndedError when it is the harness's -32007 session_not_active, else err. */
export function sessionEnded(err: unknown): unknown {
  if (err instanceof RpcError && err.code === ErrorCode.SessionNotActive) return new SessionEndedError({ reason: err.reason, cause: err });
  return err;
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
