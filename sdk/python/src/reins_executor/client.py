"""The executor end of reins.executor.v1: token exchange, connect, register,
heartbeats, tool calls, reconnect with resume. docs/executor.md in the reins
repository describes the protocol."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import platform
import random
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Awaitable, Callable, NoReturn, Union, cast

from ._conn import DEFERRED, Conn, Reply, dial, status_of
from .agent import AcceptTurn, AgentHandler, _AgentTurns
from .errors import (
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
    RPCError,
    _close_code_of,
    _rpc_error_of,
    _session_ended,
    code_message,
)

SUBPROTOCOL = "reins.executor.v1"
"""The WebSocket subprotocol of the executor protocol."""

_RESULT_IN_ACK_WINDOW = 0.020  # a tool call may run this long before tool.call is acknowledged without its result
_MAX_UNPROVEN = 256  # results sent in acknowledgements awaiting proof of receipt before an early heartbeat
_MAX_SEEN_CALLS = 1024  # tool_call_ids a session remembers, to never run a call twice
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass
class ToolResult:
    """The outcome of a tool call. A tool that ran and failed is a result with
    ``is_error``; ``error_code`` is a machine-readable cause ("timeout")."""

    content: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    error_code: str | None = None

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, error_code: str | None = None) -> ToolResult:
        """A result of one text block."""
        return cls([{"type": "text", "text": text}], is_error, error_code)

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content, "is_error": self.is_error}
        if self.error_code:
            out["error_code"] = self.error_code
        return out


@dataclass
class ToolContext:
    """What a tool handler gets besides its input."""

    session_id: str
    tool_call_id: str
    env: dict[str, str]
    """The session's variables from session.assign (its environment_variable credentials)."""
    cwd: str
    """The session's directory (``workspace/<session_id>``), or "" without ``workspace``."""
    read_only: bool
    canceled: asyncio.Event
    """Set on tool.cancel (an interrupt), at timeout_ms, on release or stop; the handler's task is cancelled too."""


ToolHandler = Callable[
    [dict[str, Any], ToolContext],
    Union[Awaitable[Union[ToolResult, str, dict[str, Any]]], ToolResult, str, dict[str, Any]],
]
"""Runs one tool call and returns its result (a str is one text block).

Raising :class:`RPCError` answers the tool.call with that JSON-RPC error when
the acknowledgement has not gone yet (a handler that raises at once);
otherwise it becomes an error result whose error_code is its reason. Any
other exception is an error result with its message."""


@dataclass
class Token:
    """An executor token and where to connect with it."""

    token: str
    expires_at: float | None = None  # Unix time; a token within 30 s of it is not reused
    url: str | None = None


@dataclass
class Event:
    """A state change, for display: connecting, registered, disconnected,
    session_assigned, session_released, session_rejected (``error`` is the
    :class:`AssignRejectedError` the client answered), tool_started,
    tool_finished, tool_canceled, turn_started."""

    type: str
    session_id: str | None = None
    tool_call_id: str | None = None
    tool: str | None = None
    error: BaseException | None = None
    result: ToolResult | None = None
    reason: str | None = None


@dataclass
class _Session:
    a: dict[str, Any]
    cwd: str
    calls: dict[str, tuple[asyncio.Task[Any], asyncio.Event]] = field(default_factory=dict)
    seen: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    closed: bool = False


@dataclass
class _OutboxEntry:
    r: dict[str, Any]
    ack_conn: Conn | None = None  # the connection whose tool.call acknowledgement carried the result
    acked: bool = False


class _Timeout(Exception):
    pass


class ExecutorClient:
    """The executor end of the protocol.

    ``await client.run()`` connects, registers and serves until a terminal
    error, which it raises: :class:`ReplacedError` (4004),
    :class:`CredentialRejectedError`, :class:`ReconnectExhaustedError`,
    :class:`RegistrationRefusedError`, or :class:`ClientStoppedError` (after
    :meth:`stop`, or 4003).
    """

    def __init__(
        self,
        url: str,
        *,
        tools: dict[str, ToolHandler] | None = None,
        agent: AgentHandler | None = None,
        accept_turn: AcceptTurn | None = None,
        environment_key: str | None = None,
        machine_token: str | None = None,
        token_source: Callable[[], Awaitable[Token]] | None = None,
        name: str | None = None,
        version: str | None = None,
        capabilities: list[str] | None = None,
        workspace: str | None = None,
        on_assign: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
        on_release: Callable[[str], None] | None = None,
        max_sessions: int = 1,
        max_concurrent_calls: int | None = None,
        max_reconnect_attempts: int = 0,
        max_refused_registrations: int = 3,
        backoff_min: float = 0.5,
        backoff_max: float = 30.0,
        request_timeout: float = 30.0,
        max_frame_bytes: int = 16 << 20,
        on_event: Callable[[Event], None] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if not url:
            raise ValueError("url is required")
        if not (environment_key or machine_token or token_source):
            raise ValueError("environment_key, machine_token or token_source is required")
        self._url = url.rstrip("/")
        self._credential = environment_key or machine_token or ""
        self._token_source = token_source
        self._tools = dict(tools or {})
        self._caps = list(capabilities) if capabilities is not None else ["tool:" + n for n in self._tools] + (["agent"] if agent else [])
        host = socket.gethostname()
        self._info: dict[str, Any] = {"name": name or host, "hostname": host, "os": sys.platform, "arch": platform.machine()}
        if version:
            self._info["version"] = version
        self._workspace = workspace
        self._on_assign = on_assign
        self._on_release = on_release
        self._max_sessions = max(1, max_sessions)
        self._max_calls = max_concurrent_calls if max_concurrent_calls and max_concurrent_calls > 0 else 16 * self._max_sessions
        self._max_reconnects = max(0, max_reconnect_attempts)
        self._max_refusals = max_refused_registrations if max_refused_registrations > 0 else 3
        self._backoff = (backoff_min if backoff_min > 0 else 0.5, backoff_max if backoff_max > 0 else 30.0)
        self._request_timeout = request_timeout
        self._max_frame = max_frame_bytes
        self._on_event = on_event
        self._log = logger or logging.getLogger("reins_executor")
        self._turns = _AgentTurns(agent, accept_turn, self._log)
        self.protocol = SUBPROTOCOL  # sent in executor.register (tests vary it)

        self._conn: Conn | None = None
        self._sessions: dict[str, _Session] = {}
        self._outbox: dict[str, _OutboxEntry] = {}
        self._in_ack = False
        self._unproven = 0
        self._running = 0
        self._token: Token | None = None
        self._stopped = False
        self._ended = False
        self._error: BaseException | None = None
        self._wake: asyncio.Event | None = None
        self._prove: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def error(self) -> BaseException | None:
        """Why the client ended, or None while it runs."""
        return self._error

    def stop(self) -> None:
        """Stops the client: the connection closes normally (the harness treats
        the executor's sessions as lost), running calls are cancelled and
        :meth:`run` raises :class:`ClientStoppedError`."""
        if self._stopped:
            return
        self._stopped = True
        if self._wake is not None:
            self._wake.set()
        if self._conn is not None:
            self._spawn(self._conn.close(1000, "executor stopped"))

    async def call(self, method: str, params: Any) -> Any:
        """Sends a request to the harness over the registered connection.
        Raises NotConnectedError when not registered, ClientStoppedError
        after the client ended, SessionEndedError when the harness answers
        -32007 session_not_active, and RPCError for its other refusals."""
        if self._stopped or self._ended:
            raise ClientStoppedError()
        if self._conn is None:
            raise NotConnectedError()
        try:
            return await self._conn.call(method, params)
        except RPCError as e:
            ended = _session_ended(e)
            if ended is e:
                raise
            raise ended from e

    async def run(self) -> NoReturn:
        """Connects and serves until a terminal error, which it raises. Call it once."""
        self._wake = asyncio.Event()
        try:
            err: BaseException = await self._loop()
        except asyncio.CancelledError:
            self._stopped = True
            err = ClientStoppedError()
            self._finish(err)
            raise
        self._finish(err)
        raise err

    def _finish(self, err: BaseException) -> None:
        self._error = err
        self._ended = self._stopped = True
        for sid in list(self._sessions):
            self._drop_session(sid)
        self._turns.stop()

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _emit(self, e: Event) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(e)
        except Exception as x:  # noqa: BLE001 - a display callback must not end the client
            self._log.warning("on_event failed: %s", x)

    async def _loop(self) -> BaseException:
        failures = refusals = 0
        last: BaseException | None = None
        while True:
            if self._stopped:
                return ClientStoppedError()
            self._emit(Event("connecting", error=last))
            registered, err = await self._connect_once()
            if registered:
                failures = refusals = 0
            if self._stopped:
                return ClientStoppedError()
            self._emit(Event("disconnected", error=err))
            code = _close_code_of(err)
            rpc = _rpc_error_of(err)
            if isinstance(err, CredentialRejectedError):
                return err
            if code == CloseCode.REPLACED:
                return ReplacedError(err.reason if isinstance(err, ConnectionClosedError) else "")
            if code == CloseCode.UNSUPPORTED_PROTOCOL or (rpc is not None and rpc.code == ErrorCode.UNSUPPORTED_PROTOCOL):
                stopped = ClientStoppedError(f"client stopped: unsupported protocol: {err}", CloseCode.UNSUPPORTED_PROTOCOL)
                stopped.__cause__ = err
                return stopped
            if code == CloseCode.REGISTRATION_REFUSED or (rpc is not None and rpc.code == ErrorCode.CAPABILITY_UNAVAILABLE):
                refusals += 1
                self._log.warning("executor registration refused (%d): %s", refusals, err)
                if refusals >= self._max_refusals:
                    return RegistrationRefusedError(err)
            if code == CloseCode.TOKEN_EXPIRED:
                self._token = None
                if registered:
                    last = err
                    continue  # refresh and reconnect at once
            last = err
            failures += 1
            if self._max_reconnects > 0 and failures > self._max_reconnects:
                return ReconnectExhaustedError(failures, err)
            delay = reconnect_delay(failures, *self._backoff)
            self._log.info("executor disconnected (%s); reconnecting in %.2f s", err, delay)
            assert self._wake is not None
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass

    async def _get_token(self) -> Token:
        t = self._token
        if t is not None and (t.expires_at is None or t.expires_at - time.time() > 30):
            return t
        fresh = await self._token_source() if self._token_source else await asyncio.to_thread(self._exchange)
        if not fresh.url:
            fresh.url = connect_url(self._url)
        self._token = fresh
        return fresh

    def _exchange(self) -> Token:
        """POST /v1/executor/tokens with the environment key or machine token."""
        req = urllib.request.Request(
            self._url + "/v1/executor/tokens",
            data=json.dumps({"executor": self._info}).encode(),
            headers={"Authorization": "Bearer " + self._credential, "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the operator's URL
                body = resp.read(1 << 20)
        except urllib.error.HTTPError as e:
            text = e.read(1 << 20)
            if e.code in (401, 403):
                message = ""
                try:
                    message = json.loads(text)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    pass
                raise CredentialRejectedError(e.code, message) from None
            raise ConnectionError(f"token endpoint answered {e.code}") from None
        data = json.loads(body)
        if not isinstance(data, dict) or not data.get("token"):
            raise ConnectionError("malformed token response")
        return Token(data["token"], _parse_time(str(data.get("expires_at") or "")), data.get("url"))

    async def _connect_once(self) -> tuple[bool, BaseException]:
        """Gets a token, connects, registers and serves until the connection ends."""
        try:
            tok = await self._get_token()
            assert tok.url is not None
            ws = await dial(tok.url, tok.token, SUBPROTOCOL, self._max_frame, 30)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure is retried or ends the loop
            if status_of(e) == 401:
                self._token = None
            return False, e
        if self._stopped:
            await ws.close(1000, "executor stopped")
            return False, ClientStoppedError()
        conn: Conn

        async def handler(method: str, params: Any, reply: Reply | None) -> Any:
            return await self._handle(conn, method, params, reply)

        conn = Conn(ws, handler, self._request_timeout, self._log)
        serving = self._spawn(conn.serve())
        held = self._held()
        try:
            res = await conn.call(
                "executor.register",
                {"protocol": self.protocol, "executor": self._info, "capabilities": self._caps, "max_sessions": self._max_sessions, "sessions": held},
            )
        except RPCError as e:
            # A refusal may be followed by its close code: let it arrive.
            try:
                closed = await asyncio.wait_for(asyncio.shield(conn.closed), 2)
                closed.__cause__ = e
                err: BaseException = closed
            except asyncio.TimeoutError:
                err = e
            await conn.close(1000, "registration failed")
            await serving
            return False, err
        except Exception as e:  # noqa: BLE001 - the connection failed before registering
            await conn.close(1000, "registration failed")
            await serving
            return False, e
        res = res if isinstance(res, dict) else {}
        self._drop_lost(res.get("lost") or [], held)
        self._conn = conn
        self._in_ack = "result_in_ack" in (res.get("features") or [])
        self._unproven = 0
        if self._stopped:
            await conn.close(1000, "executor stopped")
        self._emit(Event("registered"))
        interval = (res.get("heartbeat_interval_ms") or 10_000) / 1000
        beats = self._spawn(self._heartbeats(conn, interval))
        self._spawn(self._send_results(conn))
        closed = await serving
        self._turns.lost(conn)
        if self._conn is conn:
            self._conn = None
        await beats
        return True, closed

    def _held(self) -> list[dict[str, str]]:
        return [{"session_id": s.a["session_id"], "lease_id": s.a["lease_id"]} for s in self._sessions.values()]

    def _drop_lost(self, lost: list[dict[str, Any]], held: list[dict[str, str]]) -> None:
        """Ends the sessions the harness reported lost, of those held as sent."""
        sent = {h["session_id"]: h["lease_id"] for h in held}
        for item in lost:
            sid = item.get("session_id", "")
            s = self._sessions.get(sid)
            if s is not None and s.a["lease_id"] == sent.get(sid):
                self._drop_session(sid)

    def _drop_session(self, sid: str) -> None:
        s = self._sessions.pop(sid, None)
        if s is None:
            return
        s.closed = True
        for task, canceled in s.calls.values():
            canceled.set()
            task.cancel()
        for cid in [c for c, e in self._outbox.items() if e.r["session_id"] == sid]:
            self._drop_result(cid)
        if self._on_release is not None:
            try:
                self._on_release(sid)
            except Exception as x:  # noqa: BLE001
                self._log.warning("on_release failed: %s", x)
        self._emit(Event("session_released", session_id=sid))

    def _drop_result(self, cid: str) -> None:
        e = self._outbox.pop(cid, None)
        if e is not None and e.acked and self._conn is not None and e.ack_conn is self._conn:
            self._unproven -= 1

    async def _heartbeats(self, conn: Conn, interval: float) -> None:
        """Renews the leases every interval, and early when results sent in
        acknowledgements pile up."""
        self._prove = asyncio.Event()
        while not conn.is_closed:
            prove: asyncio.Future[Any] = asyncio.ensure_future(self._prove.wait())
            waits: list[asyncio.Future[Any]] = [prove, conn.closed]
            await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            prove.cancel()
            self._prove.clear()
            if conn.is_closed:
                return
            held = self._held()
            sent = [cid for cid, e in self._outbox.items() if e.acked and e.ack_conn is conn]
            try:
                res = await conn.call("executor.heartbeat", {"sessions": held})
            except Exception as e:  # noqa: BLE001
                self._log.debug("heartbeat failed: %s", e)
                continue
            for cid in sent:
                entry = self._outbox.get(cid)
                if entry is not None and entry.acked and entry.ack_conn is conn:
                    self._drop_result(cid)
            self._drop_lost((res or {}).get("lost") or [], held)

    async def _send_results(self, conn: Conn) -> None:
        """Sends the results not yet acknowledged (calls that finished while disconnected)."""
        for e in [e for e in self._outbox.values() if e.ack_conn is not conn]:
            if not await self._deliver(conn, e.r):
                return

    async def _deliver(self, conn: Conn, r: dict[str, Any]) -> bool:
        """Sends one tool.result; False if the connection failed (the result stays for a resend)."""
        try:
            await conn.call("tool.result", r)
        except RPCError as e:
            self._log.warning("tool result %s refused: %s", r["tool_call_id"], e)
        except Exception:  # noqa: BLE001
            return False
        self._drop_result(r["tool_call_id"])
        return True

    async def _handle(self, conn: Conn, method: str, params: Any, reply: Reply | None) -> Any:
        if not isinstance(params, dict):
            raise RPCError(ErrorCode.INVALID_PARAMS, "", {"detail": "params must be an object"})
        p = params
        if method == "session.assign":
            return await self._assign(p)
        if method == "session.release":
            s = self._sessions.get(p.get("session_id", ""))
            if s is not None and (not p.get("lease_id") or s.a["lease_id"] == p.get("lease_id")):
                self._drop_session(p["session_id"])
            return {}
        if method == "tool.call":
            return self._tool_call(conn, p, reply)
        if method == "tool.cancel":
            s = self._sessions.get(p.get("session_id", ""))
            call = s.calls.get(p.get("tool_call_id", "")) if s else None
            if call is not None:
                self._emit(Event("tool_canceled", session_id=p["session_id"], tool_call_id=p["tool_call_id"], reason=str(p.get("reason", ""))))
                call[1].set()
                call[0].cancel()
            return {}
        if method == "turn.start":
            res = await self._turns.start(conn, p)
            self._emit(Event("turn_started", session_id=p["session_id"]))
            return res
        if method == "turn.cancel":
            return self._turns.cancel(p)
        if method == "executor.close":
            self._log.info("harness is closing the connection: %s %s", p.get("code"), p.get("reason"))
            return {}
        if method in ("process.start", "process.signal"):
            raise RPCError(ErrorCode.CAPABILITY_UNAVAILABLE, "", {"capability": "process"})
        if method in ("terminal.open", "terminal.input", "terminal.resize", "terminal.close"):
            raise RPCError(ErrorCode.CAPABILITY_UNAVAILABLE, "", {"capability": "process.pty", "terminal_code": "pty_unavailable"})
        raise RPCError(ErrorCode.METHOD_NOT_FOUND, "")

    async def _assign(self, a: dict[str, Any]) -> dict[str, Any]:
        """Answers session.assign: accepted, or a refusal reported as a session_rejected event."""
        sid, lease = a.get("session_id"), a.get("lease_id")
        if not sid or not lease:
            raise RPCError(ErrorCode.INVALID_PARAMS, "", {"detail": "session_id and lease_id are required"})
        try:
            await self._admit(a)
        except Exception as e:  # noqa: BLE001 - a refusal
            if isinstance(e, AssignRejectedError):
                rejected = e
            elif isinstance(e, RPCError):
                rejected = AssignRejectedError(e.reason or "workspace_unavailable", e.message)
            else:
                rejected = AssignRejectedError("workspace_unavailable", str(e))
            self._log.warning("session %s refused: %s", sid, rejected)
            self._emit(Event("session_rejected", session_id=sid, error=rejected, reason=rejected.reason))
            out: dict[str, Any] = {"accepted": False, "reason": rejected.reason}
            if rejected.detail:
                out["message"] = rejected.detail
            return out
        return {"accepted": True}

    async def _admit(self, a: dict[str, Any]) -> None:
        """Takes a session, or raises why not."""
        sid = a["session_id"]
        for t in a.get("tools") or []:
            if "tool:" + t not in self._caps:
                raise AssignRejectedError("session_rejected", f"tool {t} is not served here")
        existing = self._sessions.get(sid)
        if existing is not None:
            existing.a = a  # a new lease for a session already here
            return

        def busy() -> bool:
            return self._stopped or len(self._sessions) >= self._max_sessions or sid in self._sessions

        if busy():
            raise AssignRejectedError("executor_busy", f"at max_sessions ({self._max_sessions})")
        cwd = ""
        if self._workspace:
            if not _SESSION_ID.match(sid):
                raise AssignRejectedError("session_rejected", "the session id is not usable as a directory name")
            cwd = os.path.join(self._workspace, sid)
            os.makedirs(cwd, mode=0o700, exist_ok=True)
        if self._on_assign is not None:
            out = self._on_assign(a)
            if inspect.isawaitable(out):
                await out
        if busy():
            raise AssignRejectedError("executor_busy", f"at max_sessions ({self._max_sessions})")
        self._sessions[sid] = _Session(a, cwd)
        self._emit(Event("session_assigned", session_id=sid))

    def _tool_call(self, conn: Conn, p: dict[str, Any], reply: Reply | None) -> Any:
        """Starts a tool call. With result_in_ack the acknowledgement waits up
        to 20 ms and carries the result (or the handler's RPCError) of a call
        that finished by then; otherwise the result follows as tool.result."""
        cid, name, sid = p.get("tool_call_id"), p.get("name"), p.get("session_id", "")
        if not cid or not name:
            raise RPCError(ErrorCode.INVALID_PARAMS, "", {"detail": "tool_call_id and name are required"})
        s = self._sessions.get(sid)
        if s is None:
            raise RPCError(ErrorCode.SESSION_NOT_ACTIVE, "", {"detail": "the session is not assigned to this executor"})
        if s.a["lease_id"] != p.get("lease_id"):
            raise RPCError(ErrorCode.LEASE_EXPIRED, "", {"detail": "the lease is not current"})
        handler = self._tools.get(name)
        if handler is None or "tool:" + name not in self._caps:
            raise RPCError(ErrorCode.CAPABILITY_UNAVAILABLE, "", {"capability": "tool:" + name, "detail": f"tool {name} is not declared"})
        if cid in s.seen or cid in s.calls or s.closed or cid in self._outbox:
            return {"accepted": True}  # running or done: never run twice
        if self._running >= self._max_calls:
            raise RPCError(ErrorCode.EXECUTOR_BUSY, "", {"detail": "too many tool calls in flight"})
        self._running += 1
        s.seen[cid] = None
        if len(s.seen) > _MAX_SEEN_CALLS:
            del s.seen[next(iter(s.seen))]
        in_ack = self._in_ack and self._conn is conn and reply is not None
        canceled = asyncio.Event()
        task = asyncio.ensure_future(self._run_tool(s, p, handler, canceled))
        s.calls[cid] = (task, canceled)
        self._spawn(self._finish_call(conn, s, p, task, reply if in_ack else None))
        return DEFERRED if in_ack else {"accepted": True}

    async def _finish_call(self, conn: Conn, s: _Session, p: dict[str, Any], task: asyncio.Task[Any], reply: Reply | None) -> None:
        cid, sid = p["tool_call_id"], p["session_id"]
        answered = reply is None
        if reply is not None:
            done, _ = await asyncio.wait([task], timeout=_RESULT_IN_ACK_WINDOW)
            if not done:
                answered = True
                await reply({"accepted": True}, None)
        try:
            out: ToolResult | RPCError = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            out = ToolResult.text("the tool call was canceled", is_error=True, error_code="canceled")
        s.calls.pop(cid, None)
        self._running -= 1
        if isinstance(out, RPCError) and not answered:
            assert reply is not None
            s.seen.pop(cid, None)  # not accepted: the same call sent again runs
            await reply(None, out)  # no result: the error is the answer
            return
        result = _error_result(out) if isinstance(out, RPCError) else out
        self._emit(Event("tool_finished", session_id=sid, tool_call_id=cid, tool=p["name"], result=result))
        if self._sessions.get(sid) is not s:
            return
        # The result stays in the outbox until acknowledged, so that it is
        # sent again after a reconnect.
        e = _OutboxEntry({"session_id": sid, "tool_call_id": cid, **result.to_wire()})
        self._outbox[cid] = e
        if not answered:
            assert reply is not None
            if await reply({"accepted": True, "result": result.to_wire()}, None):
                if self._outbox.get(cid) is e:
                    e.ack_conn, e.acked = conn, True
                    if self._conn is conn:
                        self._unproven += 1
                        if self._unproven >= _MAX_UNPROVEN and self._prove is not None:
                            self._prove.set()
                return
        if self._conn is not None:
            await self._deliver(self._conn, e.r)

    async def _run_tool(self, s: _Session, p: dict[str, Any], handler: ToolHandler, canceled: asyncio.Event) -> ToolResult | RPCError:
        """Runs the handler; its result, an RPCError it raised, or the result of a cancel or timeout."""
        cid, sid = p["tool_call_id"], p["session_id"]
        self._emit(Event("tool_started", session_id=sid, tool_call_id=cid, tool=p["name"]))
        ctx = ToolContext(sid, cid, dict(s.a.get("env") or {}), s.cwd, bool((s.a.get("workspace") or {}).get("read_only")), canceled)
        timeout_ms = p.get("timeout_ms")
        timeout = timeout_ms / 1000 if isinstance(timeout_ms, (int, float)) and timeout_ms > 0 else None

        async def call() -> ToolResult | str | dict[str, Any]:
            out = handler(p.get("input") or {}, ctx)
            if inspect.isawaitable(out):
                return cast("ToolResult | str | dict[str, Any]", await out)
            return cast("ToolResult | str | dict[str, Any]", out)

        try:
            out = await asyncio.wait_for(call(), timeout)
        except asyncio.TimeoutError:
            canceled.set()
            return ToolResult.text("the tool call timed out", is_error=True, error_code="timeout")
        except asyncio.CancelledError:
            return ToolResult.text("the tool call was canceled", is_error=True, error_code="canceled")
        except RPCError as e:
            if canceled.is_set():
                return ToolResult.text("the tool call was canceled", is_error=True, error_code="canceled")
            return e
        except Exception as e:  # noqa: BLE001 - an error result the model reads
            if canceled.is_set():
                return ToolResult.text("the tool call was canceled", is_error=True, error_code="canceled")
            return ToolResult.text(str(e) or type(e).__name__, is_error=True)
        if isinstance(out, str):
            result = ToolResult.text(out)
        elif isinstance(out, dict):
            result = ToolResult(list(out.get("content") or []), bool(out.get("is_error")), out.get("error_code"))
        else:
            result = out
        if canceled.is_set() and not result.is_error:
            return ToolResult.text("the tool call was canceled", is_error=True, error_code="canceled")
        return result


def _error_result(e: RPCError) -> ToolResult:
    """The tool result of an RPCError raised after the call was acknowledged."""
    return ToolResult.text(e.message, is_error=True, error_code=e.reason or code_message(e.code) or str(e.code))


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def _parse_time(s: str) -> float | None:
    """Unix time of an RFC 3339 timestamp, or None."""
    m = _RFC3339.match(s)
    if m is None:
        return None
    frac = "." + ((m.group(2) or "") + "000000")[:6]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


def connect_url(base: str) -> str:
    """The WebSocket connect URL of a server's base URL."""
    b = base.rstrip("/")
    if b.endswith("/v1/executor/connect"):
        b = b[: -len("/v1/executor/connect")]
    if b.startswith("https://"):
        b = "wss://" + b[len("https://") :]
    elif b.startswith("http://"):
        b = "ws://" + b[len("http://") :]
    return b + "/v1/executor/connect"


def reconnect_delay(n: int, lo: float, hi: float) -> float:
    """The delay before reconnect attempt n (1-based): uniform in [0, min(hi, lo*2^(n-1))]."""
    return random.uniform(0, min(hi, lo * 2 ** min(n - 1, 30)))
