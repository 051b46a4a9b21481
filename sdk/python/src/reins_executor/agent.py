"""The agent end of reins.executor.v1 (capability "agent"): an external agent
loop ("brain") that runs a session's turns while reins keeps the log, the API
and the permissions. docs/executor.md ("Agent ends") in the reins repository
describes the methods."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Union

from ._conn import Conn
from .errors import (
    ErrorCode,
    RPCError,
    SessionEndedError,
    ToolCallHTTPError,
    ToolOutcomeUnknownError,
    _session_ended,
)

EVENT_TURN_END = "turn.end"
"""The event an agent end appends last in a turn."""

_TOOLS_REFRESH_MARGIN = 30.0  # a tools token that expires sooner is refreshed before a call
_TOOL_CALL_ATTEMPTS = 3  # attempts of a platform tool call whose request failed on the way
_MAX_RESPONSE = 64 << 20


@dataclass
class PlatformToolResult:
    """The outcome of a platform tool call; a refusal is a result with
    ``is_error`` and an ``error_code`` (permission_denied, approval_required,
    environment_unavailable, …)."""

    tool_call_id: str = ""
    """The agent.tool_use the call recorded ("" when none)."""
    status: str = "completed"
    content: list[dict[str, Any]] = field(default_factory=list)
    is_error: bool = False
    error_code: str = ""

    @property
    def text(self) -> str:
        """The text of the content blocks."""
        return "".join(str(b.get("text", "")) for b in self.content)


class Turn:
    """One turn on the agent end. ``start`` is the turn.start (session_id,
    turn_id, inputs, transcript — always whole: this SDK does not declare
    transcript_deltas —, agent, and the grants model and tools)."""

    def __init__(self, start: dict[str, Any], conn: Conn) -> None:
        self.start = start
        self.canceled = asyncio.Event()
        """Set on turn.cancel (an interrupt), when the connection that started the turn ends and on stop; the handler's task is cancelled too."""
        self.cancel_reason: str | None = None
        """Why: "interrupt", "connection lost" or "client stopped"."""
        self._conn = conn
        self._next = 0
        self._send_lock = asyncio.Lock()

    @property
    def session_id(self) -> str:
        return str(self.start["session_id"])

    @property
    def turn_id(self) -> str:
        return str(self.start["turn_id"])

    @property
    def next_sequence(self) -> int:
        """The sequence the next send uses."""
        return self._next

    async def send(self, *events: dict[str, Any]) -> None:
        """Appends events (agent.message, agent.thinking, agent.custom_tool_use,
        span.* and last {"type": "turn.end"}) with the next sequence
        (session.event), one batch at a time. A -32013 conflict (a gap, or a
        batch the harness already has) raises that RPCError and the next send
        continues from its expected_sequence, so a batch whose answer was lost
        may be sent again. A turn no longer running raises
        :class:`SessionEndedError` (reason turn_inactive)."""
        async with self._send_lock:
            try:
                res = await self._conn.call(
                    "session.event", {"session_id": self.session_id, "turn_id": self.turn_id, "sequence": self._next, "events": list(events)}
                )
            except RPCError as e:
                expected = (e.data or {}).get("expected_sequence") if e.code == ErrorCode.CONFLICT else None
                if isinstance(expected, int):
                    self._next = expected
                ended = _session_ended(e)
                if ended is e:
                    raise
                raise ended from e
            n = (res or {}).get("next_sequence")
            if isinstance(n, int):
                self._next = n

    async def end_turn(self) -> None:
        """Appends the end of the turn."""
        await self.send({"type": EVENT_TURN_END})

    async def refresh_model_token(self) -> dict[str, Any]:
        """A fresh model token (model_token.refresh); ``start["model"]`` becomes
        it. Refusals: SessionEndedError (turn_inactive), RPCError (forbidden,
        model_token_unavailable)."""
        g = await self._refresh("model_token.refresh")
        self.start["model"] = {**(self.start.get("model") or {}), **g}
        return dict(self.start["model"])

    async def refresh_tools_token(self) -> dict[str, Any]:
        """A fresh tools token (tools_token.refresh); ``start["tools"]`` becomes
        it. Refusals as :meth:`refresh_model_token`, with tools_token_unavailable."""
        g = await self._refresh("tools_token.refresh")
        old = self.start.get("tools") or {}
        self.start["tools"] = {**old, **g, "url": g.get("url") or old.get("url")}
        return dict(self.start["tools"])

    async def _refresh(self, method: str) -> dict[str, Any]:
        try:
            res = await self._conn.call(method, {"session_id": self.session_id, "turn_id": self.turn_id})
        except RPCError as e:
            ended = _session_ended(e)
            if ended is e:
                raise
            raise ended from e
        return dict(res or {})

    async def call_tool(self, name: str, input: Any = None, *, idempotency_key: str | None = None, approval: str | None = None) -> PlatformToolResult:  # noqa: A002
        """Runs a built-in tool of the session's agent through the platform
        tools endpoint (POST /v1/sessions/{id}/tool_calls) with the turn's
        tools token, refreshed when it is about to expire or answered 401, and
        an Idempotency-Key (a new one unless given; retries reuse it); it waits
        while the call is in_progress. A refused call is a result with
        error_code. Raises :class:`ToolCallHTTPError` for a refused request,
        :class:`SessionEndedError` when the turn is no longer running (409
        turn_inactive, or a refused refresh), and
        :class:`ToolOutcomeUnknownError` when the endpoint gave no answer."""
        key = idempotency_key or uuid.uuid4().hex
        body: dict[str, Any] = {"name": name}
        if input is not None:
            body["input"] = input
        if approval:
            body["approval"] = {"tool_use_id": approval}
        data = json.dumps(body).encode()
        refreshed, failures, wait = False, 0, 0.05
        while True:
            grant = await self._tools_grant(False)
            try:
                status, text = await asyncio.to_thread(_post, grant["url"], grant["token"], key, data)
            except (urllib.error.URLError, OSError) as e:
                failures += 1
                if failures >= _TOOL_CALL_ATTEMPTS:
                    raise ToolOutcomeUnknownError(key, e) from None
                await asyncio.sleep(wait)
                wait = min(2 * wait, 2.0)
                continue
            if status == 401 and not refreshed:
                refreshed = True
                await self._tools_grant(True)
                continue
            if status != 200:
                raise _http_error(status, text)
            out = json.loads(text)
            res = PlatformToolResult(
                str(out.get("tool_call_id") or ""), str(out.get("status") or ""), list(out.get("content") or []), bool(out.get("is_error")), str(out.get("error_code") or "")
            )
            if res.status != "in_progress":
                return res
            await asyncio.sleep(wait)
            wait = min(2 * wait, 2.0)

    async def _tools_grant(self, force: bool) -> dict[str, Any]:
        """The turn's tools grant, refreshed first when forced, missing or about to expire."""
        g = self.start.get("tools") or {}
        if not force and g.get("url") and _expires(g) - time.time() > _TOOLS_REFRESH_MARGIN:
            return dict(g)
        return await self.refresh_tools_token()


def _expires(grant: dict[str, Any]) -> float:
    from .client import _parse_time  # one RFC 3339 parser

    return _parse_time(str(grant.get("expires_at") or "")) or 0.0


def _post(url: str, token: str, key: str, data: bytes) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Authorization": "Bearer " + token, "Idempotency-Key": key, "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:  # noqa: S310 - the harness's grant
            return resp.status, resp.read(_MAX_RESPONSE)
    except urllib.error.HTTPError as e:
        return e.code, e.read(1 << 20)


def _http_error(status: int, text: bytes) -> BaseException:
    """The error of a non-200 answer of the tools endpoint."""
    typ, message = "", text[:1000].decode("utf-8", "replace")
    try:
        env = json.loads(text)["error"]
        typ, message = str(env.get("type") or ""), str(env.get("message") or message)
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    e = ToolCallHTTPError(status, typ, message)
    if status == 409 and message.startswith("turn_inactive"):
        return SessionEndedError("turn_inactive", e)
    return e


AgentHandler = Callable[[Turn], Awaitable[None]]
"""Runs one turn (``turn.canceled`` is set and the task cancelled on turn.cancel)."""

AcceptTurn = Callable[[dict[str, Any]], Union[Awaitable[None], None]]
"""Asked before a turn.start is acknowledged; raising refuses the turn."""


class _AgentTurns:
    """The turns running on a client, by turn id."""

    def __init__(self, handler: AgentHandler | None, accept: AcceptTurn | None, logger: logging.Logger) -> None:
        self._handler = handler
        self._accept = accept
        self._log = logger
        self._running: dict[str, tuple[Turn, asyncio.Task[Any], Conn]] = {}

    async def start(self, conn: Conn, p: dict[str, Any]) -> dict[str, Any]:
        """Answers turn.start: the handler runs in a task of its own."""
        if self._handler is None:
            raise RPCError(ErrorCode.CAPABILITY_UNAVAILABLE, "", {"capability": "agent", "detail": "this executor runs no agent loop"})
        if not p.get("session_id") or not p.get("turn_id"):
            raise RPCError(ErrorCode.INVALID_PARAMS, "", {"detail": "session_id and turn_id are required"})
        start = {**p, "inputs": p.get("inputs") or []}
        if self._accept is not None:
            try:
                out = self._accept(start)
                if inspect.isawaitable(out):
                    await out
            except Exception as e:
                self._log.info("turn %s of session %s refused: %s", start["turn_id"], start["session_id"], e)
                raise
        turn = Turn(start, conn)
        task = asyncio.ensure_future(self._run(turn))
        self._running[turn.turn_id] = (turn, task, conn)
        task.add_done_callback(lambda _: self._forget(turn))
        return {"accepted": True}

    async def _run(self, turn: Turn) -> None:
        await asyncio.sleep(0)  # after the acknowledgement goes out
        assert self._handler is not None
        try:
            await self._handler(turn)
        except asyncio.CancelledError:
            pass
        except Exception as e:  # noqa: BLE001 - logged: the harness ends or restarts the turn
            if not turn.canceled.is_set():
                self._log.warning("agent turn %s failed: %s", turn.turn_id, e)

    def _forget(self, turn: Turn) -> None:
        entry = self._running.get(turn.turn_id)
        if entry is not None and entry[0] is turn:
            del self._running[turn.turn_id]

    def _abort(self, turn_id: str, reason: str) -> None:
        entry = self._running.pop(turn_id, None)
        if entry is None:
            return
        turn, task, _ = entry
        turn.cancel_reason = reason
        turn.canceled.set()
        task.cancel()

    def cancel(self, p: dict[str, Any]) -> dict[str, Any]:
        """Answers turn.cancel."""
        self._abort(str(p.get("turn_id", "")), str(p.get("reason") or "canceled"))
        return {}

    def lost(self, conn: Conn) -> None:
        """Cancels the turns started on a connection that ended (the harness fails them and starts them again)."""
        for tid in [t for t, e in self._running.items() if e[2] is conn]:
            self._abort(tid, "connection lost")

    def stop(self) -> None:
        for tid in list(self._running):
            self._abort(tid, "client stopped")
