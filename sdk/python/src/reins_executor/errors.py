"""Errors of the executor protocol (reins.executor.v1): JSON-RPC error codes
and data, close codes, and the typed errors a client ends with."""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.IntEnum):
    """JSON-RPC error codes of reins.executor.v1."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    UNAUTHORIZED = -32000
    FORBIDDEN = -32001
    NOT_FOUND = -32002
    LEASE_EXPIRED = -32003
    TIMEOUT = -32004
    CANCELED = -32005
    PAYLOAD_TOO_LARGE = -32006
    SESSION_NOT_ACTIVE = -32007
    MCP_UNAVAILABLE = -32008
    EXECUTOR_BUSY = -32009
    UNSUPPORTED_PROTOCOL = -32010
    RESOURCE_UNAVAILABLE = -32011
    CAPABILITY_UNAVAILABLE = -32012
    CONFLICT = -32013


def code_message(code: int) -> str:
    """The protocol's message for a code ("payload_too_large" for -32006), or ""."""
    try:
        return ErrorCode(code).name.lower()
    except ValueError:
        return ""


class CloseCode(enum.IntEnum):
    """Close codes with which the harness ends an executor connection."""

    TOKEN_EXPIRED = 4001  # refresh the token and reconnect at once
    REGISTRATION_REFUSED = 4002
    UNSUPPORTED_PROTOCOL = 4003  # terminal
    REPLACED = 4004  # terminal: a newer connection with the same identity took over
    DRAINED = 4005  # the harness node is shutting down: reconnect with backoff


_RETRYABLE = {ErrorCode.TIMEOUT, ErrorCode.EXECUTOR_BUSY, ErrorCode.RESOURCE_UNAVAILABLE}


class ExecutorError(Exception):
    """The base class of the SDK's errors."""


class RPCError(ExecutorError):
    """A JSON-RPC error. A handler that raises it keeps its code on the wire.

    An empty message becomes the code's protocol message. Codes the protocol
    marks retryable (-32004, -32009, -32011) get ``data["retryable"] = True``
    unless ``data`` says otherwise.
    """

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        message = message or code_message(code) or f"error {code}"
        if code in _RETRYABLE and (data is None or "retryable" not in data):
            data = {"retryable": True, **(data or {})}
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    @classmethod
    def with_reason(cls, code: int, reason: str, message: str) -> RPCError:
        """An error whose data.reason is ``reason``: a refusal with a machine-readable cause."""
        return cls(code, message, {"reason": reason})

    @classmethod
    def from_wire(cls, e: dict[str, Any]) -> RPCError:
        """Builds an error from its wire form."""
        data = e.get("data")
        return cls(int(e.get("code", ErrorCode.INTERNAL_ERROR)), str(e.get("message", "")), data if isinstance(data, dict) else None)

    @property
    def retryable(self) -> bool | None:
        """data.retryable, or None when the peer did not say."""
        if self.data is None:
            return None
        v = self.data.get("retryable")
        return v if isinstance(v, bool) else None

    @property
    def reason(self) -> str | None:
        """data.reason, or None."""
        return None if self.data is None else self.data.get("reason")

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC error object sent on the wire."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out

    def __str__(self) -> str:
        s = f"jsonrpc error {self.code} {self.message}"
        if self.reason:
            s += f" (reason {self.reason})"
        return s


# Client errors: the executor end.


class NotConnectedError(ExecutorError):
    """The channel is not connected (yet, or any more)."""

    def __init__(self, message: str = "executor channel is not connected") -> None:
        super().__init__(message)


class ClientStoppedError(ExecutorError):
    """The client was stopped, or closed with a terminal close code.

    ``close_code`` is that code (4003, or 4004 for :class:`ReplacedError`).
    """

    def __init__(self, message: str = "client stopped", close_code: int | None = None) -> None:
        super().__init__(message)
        self.close_code = close_code


class ReplacedError(ClientStoppedError):
    """The harness closed with 4004: another executor registered with the same
    identity (environment and name) and this one must stop."""

    def __init__(self, reason: str = "") -> None:
        super().__init__("executor connection was replaced (4004)" + (f": {reason}" if reason else ""), CloseCode.REPLACED)


class RequestTimeoutError(ExecutorError, TimeoutError):
    """A request got no response before its deadline."""

    def __init__(self, method: str) -> None:
        super().__init__(f"request {method} timed out")
        self.method = method


class ReconnectExhaustedError(ExecutorError):
    """``max_reconnect_attempts`` reconnects failed in a row; ``__cause__`` is the last failure."""

    def __init__(self, attempts: int, cause: BaseException | None) -> None:
        super().__init__(f"executor reconnect attempts exhausted after {attempts} attempts: {cause}")
        self.attempts = attempts
        self.__cause__ = cause


class CredentialRejectedError(ExecutorError):
    """The token endpoint answered 401 or 403: the environment key or machine
    token is invalid, revoked, or its environment archived. Not retried."""

    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(f"executor credential rejected: token endpoint answered {status}" + (f": {message}" if message else ""))
        self.status = status


class RegistrationRefusedError(ExecutorError):
    """The harness refused the registration ``max_refused_registrations`` times
    in a row (close 4002, or -32012 to executor.register): a configuration
    error reconnecting cannot fix."""

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__(f"executor registration refused: {cause}")
        self.__cause__ = cause


class ConnectionClosedError(ExecutorError):
    """A connection ended; ``close_code`` is its WebSocket close code (1006 when it was cut)."""

    def __init__(self, code: int, reason: str = "") -> None:
        super().__init__(f"connection closed with {code}" + (f" {reason!r}" if reason else ""))
        self.close_code = code
        self.reason = reason


# Harness errors: what the Go SDK's harness end returns as ErrSessionEnded,
# ErrToolOutcomeUnknown and ErrAssignRejected. This SDK has no harness end;
# its executor and agent ends raise them in the same situations as seen from
# their side.


class SessionEndedError(ExecutorError):
    """A request on a session, or a turn, that has ended: the harness answered
    -32007 session_not_active (for an agent end's turn, reason
    ``turn_inactive``), or the platform tools endpoint 409 turn_inactive.
    ``__cause__`` is that answer; ``reason`` its reason."""

    def __init__(self, reason: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__("session ended" + (f": {cause}" if cause is not None else ""))
        self.reason = reason
        self.__cause__ = cause


class ToolOutcomeUnknownError(ExecutorError):
    """The outcome of a tool call is unknown: what ran it was lost before the
    result arrived, and the tool may or may not have run. An agent end's
    ``call_tool`` raises it when the platform tools endpoint gave no answer
    (and neither did the retries with the same idempotency key): calling
    again with ``idempotency_key`` returns the outcome without running the
    tool twice."""

    def __init__(self, idempotency_key: str | None = None, cause: BaseException | None = None) -> None:
        super().__init__("tool outcome unknown: executor lost before tool.result" + (f": {cause}" if cause is not None else ""))
        self.idempotency_key = idempotency_key
        self.__cause__ = cause


class AssignRejectedError(ExecutorError):
    """session.assign answered accepted=false. An executor's ``on_assign``
    raises it to refuse a session with a reason (default
    ``session_rejected``); the client reports every refusal of its own as a
    ``session_rejected`` event carrying one."""

    def __init__(self, reason: str | None = None, detail: str = "") -> None:
        super().__init__("executor rejected session.assign" + (f": {reason}" if reason else "") + (f": {detail}" if detail else ""))
        self.reason = reason or "session_rejected"
        self.detail = detail


class ToolCallHTTPError(ExecutorError):
    """A request the platform tools endpoint refused as a request: 400 (a bad
    call), 401/403 (a token refused), 413. A 409 turn_inactive is a
    :class:`SessionEndedError` whose cause is this."""

    def __init__(self, status: int, type: str, message: str) -> None:  # noqa: A002 - the envelope's name
        super().__init__(f"tools endpoint: {status} {type}: {message}")
        self.status = status
        self.type = type
        self.message = message


def mcp_unavailable(server: str, cause: BaseException | str) -> RPCError:
    """The refusal of an agent end's turn.start whose MCP server cannot be
    reached: -32008 mcp_unavailable with the session.error type
    mcp_connection_failed_error, the server, retryable."""
    return RPCError(
        ErrorCode.MCP_UNAVAILABLE,
        "",
        {"reason": "mcp_connection_failed_error", "mcp_server_name": server, "retryable": True, "detail": f"MCP server {server} cannot be reached: {cause}"},
    )


def _session_ended(err: BaseException) -> BaseException:
    """err as a SessionEndedError when it is the harness's -32007, else err."""
    if isinstance(err, RPCError) and err.code == ErrorCode.SESSION_NOT_ACTIVE:
        return SessionEndedError(err.reason, err)
    return err


def _close_code_of(err: BaseException | None) -> int:
    """The close code carried by err or its causes, or -1."""
    seen = 0
    while err is not None and seen < 10:
        code = getattr(err, "close_code", None)
        if isinstance(code, int):
            return code
        err = err.__cause__
        seen += 1
    return -1


def _rpc_error_of(err: BaseException | None) -> RPCError | None:
    """The RPCError carried by err or its causes, or None."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, RPCError):
            return err
        err = err.__cause__
        seen += 1
    return None
