"""One JSON-RPC 2.0 connection over a WebSocket: requests in both directions,
answered by id."""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import logging
from typing import Any, Awaitable, Callable, Optional

from .errors import ConnectionClosedError, ErrorCode, RPCError, RequestTimeoutError

try:  # websockets >= 13: the new asyncio implementation
    _client = importlib.import_module("websockets.asyncio.client")
    _HEADERS_ARG = "additional_headers"
except ImportError:  # websockets 10-12 (Debian 12 ships 10.4)
    _client = importlib.import_module("websockets.client")
    _HEADERS_ARG = "extra_headers"
_ws_connect: Callable[..., Any] = _client.connect
from websockets.exceptions import ConnectionClosed

# A reply sends the answer of a request: (result, error) -> whether it was written.
Reply = Callable[[Any, Optional[RPCError]], Awaitable[bool]]
# A handler gets (method, params, reply or None for a notification) and
# returns the result, or DEFERRED when it answers through reply itself.
Handler = Callable[[str, Any, Optional[Reply]], Awaitable[Any]]

DEFERRED = object()


async def dial(url: str, token: str, subprotocol: str, max_size: int, open_timeout: float) -> Any:
    """Opens a WebSocket with a bearer token and the subprotocol."""
    kwargs: dict[str, Any] = {
        "subprotocols": [subprotocol],
        "max_size": max_size,
        "open_timeout": open_timeout,
        "ping_interval": None,  # the protocol has its own heartbeats
        _HEADERS_ARG: {"Authorization": "Bearer " + token},
    }
    return await _ws_connect(url, **kwargs)


def status_of(err: BaseException) -> int | None:
    """The HTTP status of a refused WebSocket handshake, if err is one."""
    code = getattr(err, "status_code", None)  # legacy InvalidStatusCode
    if isinstance(code, int):
        return code
    response = getattr(err, "response", None)  # InvalidStatus
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


class Conn:
    def __init__(self, ws: Any, handler: Handler, request_timeout: float, logger: logging.Logger) -> None:
        self._ws = ws
        self._handler = handler
        self._timeout = request_timeout
        self._log = logger
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[str, asyncio.Future[Any]]] = {}
        self._write = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed: asyncio.Future[ConnectionClosedError] = asyncio.get_running_loop().create_future()

    @property
    def is_closed(self) -> bool:
        return self.closed.done()

    async def serve(self) -> ConnectionClosedError:
        """Reads frames until the connection ends; returns the close error."""
        try:
            async for raw in self._ws:
                self._on_message(raw)
            err = self._close_error()
        except ConnectionClosed:
            err = self._close_error()
        except Exception as e:  # noqa: BLE001 - any failure ends the connection
            self._log.debug("read failed: %s", e)
            err = ConnectionClosedError(1006, str(e))
        self._finish(err)
        return err

    def _close_error(self) -> ConnectionClosedError:
        rcvd = getattr(self._ws, "close_rcvd", None)
        if rcvd is None:
            rcvd = getattr(self._ws, "rcvd", None)
        if rcvd is not None:
            return ConnectionClosedError(int(rcvd.code), str(rcvd.reason))
        code = getattr(self._ws, "close_code", None)
        if isinstance(code, int) and code != 1005:
            return ConnectionClosedError(code, str(getattr(self._ws, "close_reason", "") or ""))
        return ConnectionClosedError(1006, "connection cut")

    def _finish(self, err: ConnectionClosedError) -> None:
        if self.closed.done():
            return
        for _, fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        self.closed.set_result(err)

    async def call(self, method: str, params: Any, timeout: float | None = None) -> Any:
        """Sends a request and returns its result; raises RPCError,
        RequestTimeoutError or ConnectionClosedError."""
        if self.closed.done():
            raise self.closed.result()
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (method, fut)
        try:
            if not await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}):
                if self.closed.done():
                    raise self.closed.result()
            try:
                return await asyncio.wait_for(asyncio.shield(fut), timeout or self._timeout)
            except asyncio.TimeoutError:
                raise RequestTimeoutError(method) from None
        finally:
            self._pending.pop(rid, None)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def close(self, code: int = 1000, reason: str = "") -> None:
        try:
            await asyncio.wait_for(self._ws.close(code, reason), 2)
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    async def _send(self, msg: Any) -> bool:
        if self.closed.done():
            return False
        data = json.dumps(msg, separators=(",", ":"))
        async with self._write:
            try:
                await self._ws.send(data)
                return True
            except Exception as e:  # noqa: BLE001 - the read loop reports the end
                self._log.debug("write failed: %s", e)
                return False

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_message(self, raw: str | bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            self._spawn(self._send({"jsonrpc": "2.0", "id": None, "error": RPCError(ErrorCode.PARSE_ERROR, "").to_wire()}))
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self._spawn(self._send({"jsonrpc": "2.0", "id": None, "error": RPCError(ErrorCode.INVALID_REQUEST, "").to_wire()}))
            return
        if isinstance(msg.get("method"), str):
            self._spawn(self._on_request(msg["method"], msg.get("params"), "id" in msg, msg.get("id")))
            return
        rid = msg.get("id")
        if isinstance(rid, int) and ("result" in msg or "error" in msg):
            entry = self._pending.get(rid)
            if entry is None or entry[1].done():
                return  # answered after its timeout
            if isinstance(msg.get("error"), dict):
                entry[1].set_exception(RPCError.from_wire(msg["error"]))
            else:
                entry[1].set_result(msg.get("result"))
            return
        self._spawn(self._send({"jsonrpc": "2.0", "id": rid, "error": RPCError(ErrorCode.INVALID_REQUEST, "").to_wire()}))

    async def _on_request(self, method: str, params: Any, has_id: bool, rid: Any) -> None:
        answered = False

        async def reply(result: Any, error: RPCError | None = None) -> bool:
            nonlocal answered
            if answered:
                return False
            answered = True
            if error is not None:
                return await self._send({"jsonrpc": "2.0", "id": rid, "error": error.to_wire()})
            return await self._send({"jsonrpc": "2.0", "id": rid, "result": {} if result is None else result})

        try:
            result = await self._handler(method, params, reply if has_id else None)
        except RPCError as e:
            if has_id:
                await reply(None, e)
            return
        except Exception as e:  # noqa: BLE001 - answered internal_error
            self._log.warning("handler for %s failed: %s", method, e)
            if has_id:
                await reply(None, RPCError(ErrorCode.INTERNAL_ERROR, "", {"detail": str(e)}))
            return
        if has_id and result is not DEFERRED:
            await reply(result)
