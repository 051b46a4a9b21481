"""The client against a fake harness on loopback speaking the wire format."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

try:
    from websockets.asyncio.server import serve as ws_serve
except ImportError:  # websockets < 13
    from websockets.server import serve as ws_serve  # type: ignore[no-redef]

from reins_executor import (
    ClientStoppedError,
    CredentialRejectedError,
    ExecutorClient,
    ReconnectExhaustedError,
    RegistrationRefusedError,
    ReplacedError,
    RPCError,
    ToolContext,
)


class Peer:
    """One executor connection as the fake harness sees it."""

    def __init__(self, ws: Any, hub: FakeHub) -> None:
        self.ws = ws
        self.hub = hub
        headers = getattr(ws, "request_headers", None) or ws.request.headers
        self.auth = headers.get("Authorization")
        self.protocol = ws.subprotocol
        self.registered = asyncio.Event()
        self.register_params: dict[str, Any] = {}
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.answer_results = True
        self.next_id = 1000

    async def serve(self) -> None:
        try:
            async for raw in self.ws:
                await self.on_message(json.loads(raw))
        except Exception:  # noqa: BLE001 - the connection ended
            pass

    async def on_message(self, m: dict[str, Any]) -> None:
        if "method" not in m:
            fut = self.pending.pop(m["id"], None)
            if fut is not None:
                fut.set_result(m)
            return
        if m["method"] == "executor.register":
            self.register_params = m["params"]
            res = self.hub.register(m["params"])
            if "error" in res:
                await self.send({"jsonrpc": "2.0", "id": m["id"], "error": res["error"]})
                await self.ws.close(4002, "runtime registration refused")
            else:
                await self.send({"jsonrpc": "2.0", "id": m["id"], "result": res})
            self.registered.set()
            return
        if m["method"] == "executor.heartbeat":
            await self.send({"jsonrpc": "2.0", "id": m["id"], "result": {"renewed": [], "lost": []}})
            return
        if m["method"] == "tool.result" and self.answer_results:
            await self.send({"jsonrpc": "2.0", "id": m["id"], "result": {"duplicate": False}})
        await self.frames.put(m)

    async def send(self, m: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(m))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(fut, 5)

    async def next(self, method: str) -> dict[str, Any]:
        while True:
            m = await asyncio.wait_for(self.frames.get(), 5)
            if m["method"] == method:
                return m

    async def assign(self, tools: list[str] | None = None) -> dict[str, Any]:
        return await self.request("session.assign", {"session_id": "sesn_1", "lease_id": "lease_1", "tools": tools or [], "workspace": {"read_only": False}})

    async def tool_call(self, cid: str, name: str, input: dict[str, Any] | None = None, lease: str = "lease_1") -> dict[str, Any]:
        return await self.request("tool.call", {"session_id": "sesn_1", "lease_id": lease, "tool_call_id": cid, "name": name, "input": input or {}})


def serve_json(handle: Callable[[Any, bytes], tuple[int, Any]]) -> tuple[ThreadingHTTPServer, str]:
    """An HTTP server on loopback, on a thread of its own, whose POSTs
    ``handle(headers, body)`` answers with (status, JSON body); and its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            status, out = handle(self.headers, self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


class FakeHub:
    def __init__(self, token_status: int = 200, features: list[str] | None = None, refuse: bool = False) -> None:
        self.token_status = token_status
        self.features = ["result_in_ack"] if features is None else features
        self.refuse = refuse
        self.tokens = 0
        self.token_request: dict[str, Any] = {}
        self.peers: list[Peer] = []
        self.changed = asyncio.Event()

    def register(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.refuse:
            return {"error": {"code": -32012, "message": "capability_unavailable", "data": {"reason": "capability_missing"}}}
        return {
            "executor_id": "exec_1",
            "heartbeat_interval_ms": 50,
            "lease_ttl_ms": 30000,
            "resumed": [s["session_id"] for s in params["sessions"]],
            "lost": [],
            "features": self.features,
        }

    async def start(self) -> None:
        async def handler(ws: Any, path: str | None = None) -> None:
            peer = Peer(ws, self)
            self.peers.append(peer)
            self.changed.set()
            await peer.serve()

        self.ws_server = await ws_serve(handler, "127.0.0.1", 0, subprotocols=["reins.executor.v1"])
        ws_port = list(self.ws_server.sockets)[0].getsockname()[1]
        def tokens(headers: Any, body: bytes) -> tuple[int, Any]:
            self.token_request = {"auth": headers["Authorization"], "body": json.loads(body)}
            if self.token_status != 200:
                return self.token_status, {"type": "error", "error": {"type": "authentication_error", "message": "environment key revoked"}}
            self.tokens += 1
            return 200, {"type": "executor_token", "token": f"tok{self.tokens}", "expires_at": "2099-01-01T00:00:00.123456789Z", "url": f"ws://127.0.0.1:{ws_port}/v1/executor/connect"}

        self.http, self.url = serve_json(tokens)

    async def peer(self, n: int) -> Peer:
        async def wait() -> Peer:
            while len(self.peers) < n:
                self.changed.clear()
                await self.changed.wait()
            p = self.peers[n - 1]
            await p.registered.wait()
            return p

        return await asyncio.wait_for(wait(), 10)

    async def close(self) -> None:
        await asyncio.to_thread(self.http.shutdown)
        self.http.server_close()
        self.ws_server.close()
        await self.ws_server.wait_closed()


_quiet = logging.getLogger("reins_executor.tests")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


async def echo(input: dict[str, Any], ctx: ToolContext) -> str:
    return f"echo {input['text']}"


def refuse(input: dict[str, Any], ctx: ToolContext) -> str:
    raise RPCError.with_reason(-32001, "workspace_read_only", "no writes here")


async def late_refuse(input: dict[str, Any], ctx: ToolContext) -> str:
    await asyncio.sleep(0.05)  # after the 20 ms acknowledgement
    raise RPCError.with_reason(-32011, "workspace_unavailable", "disk gone")


async def slow(input: dict[str, Any], ctx: ToolContext) -> str:
    await asyncio.sleep(10)
    return "slow done"


def run_client(case: unittest.IsolatedAsyncioTestCase, hub: FakeHub, opts: dict[str, Any]) -> tuple[ExecutorClient, asyncio.Task[Any]]:
    """Runs a client against hub; the test's cleanup stops both."""
    client = ExecutorClient(hub.url, **opts)
    task = asyncio.ensure_future(client.run())

    async def cleanup() -> None:
        client.stop()
        try:
            await asyncio.wait_for(task, 5)
        except Exception:  # noqa: BLE001 - the end error
            pass
        await hub.close()

    case.addAsyncCleanup(cleanup)
    return client, task


class ClientTest(unittest.IsolatedAsyncioTestCase):
    async def start(self, hub: FakeHub, **kw: Any) -> tuple[ExecutorClient, asyncio.Task[Any]]:
        await hub.start()
        self.events: list[Any] = []
        opts: dict[str, Any] = dict(
            environment_key="reins_ek_test",
            name="unit",
            backoff_min=0.01,
            backoff_max=0.02,
            tools={"echo": echo, "refuse": refuse, "late_refuse": late_refuse, "slow": slow},
            on_event=self.events.append,
            logger=_quiet,
        )
        opts.update(kw)
        return run_client(self, hub, opts)

    async def ended(self, task: asyncio.Task[Any]) -> BaseException:
        try:
            await asyncio.wait_for(task, 10)
        except Exception as e:  # noqa: BLE001
            return e
        self.fail("run returned")

    async def test_token_subprotocol_registration(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        self.assertEqual(hub.token_request["auth"], "Bearer reins_ek_test")
        self.assertEqual(hub.token_request["body"]["executor"]["name"], "unit")
        self.assertEqual(peer.auth, "Bearer tok1")
        self.assertEqual(peer.protocol, "reins.executor.v1")
        self.assertEqual(peer.register_params["capabilities"], ["tool:echo", "tool:refuse", "tool:late_refuse", "tool:slow"])
        self.assertEqual(peer.register_params["max_sessions"], 1)

    async def test_result_in_ack(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        self.assertEqual((await peer.assign(["echo"]))["result"], {"accepted": True})
        ack = await peer.tool_call("call_1", "echo", {"text": "hi"})
        self.assertEqual(ack["result"], {"accepted": True, "result": {"content": [{"type": "text", "text": "echo hi"}], "is_error": False}})
        self.assertEqual((await peer.tool_call("call_1", "echo", {"text": "hi"}))["result"], {"accepted": True})

    async def test_tool_result_without_result_in_ack(self) -> None:
        hub = FakeHub(features=[])
        await self.start(hub)
        peer = await hub.peer(1)
        await peer.assign()
        self.assertEqual((await peer.tool_call("call_1", "echo", {"text": "x"}))["result"], {"accepted": True})
        r = await peer.next("tool.result")
        self.assertEqual(r["params"], {"session_id": "sesn_1", "tool_call_id": "call_1", "content": [{"type": "text", "text": "echo x"}], "is_error": False})

    async def test_rpc_error_keeps_code_and_reason(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        await peer.assign()
        ack = await peer.tool_call("call_1", "refuse")
        self.assertEqual(ack["error"], {"code": -32001, "message": "no writes here", "data": {"reason": "workspace_read_only"}})

    async def test_rpc_error_after_the_ack_is_an_error_result(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        await peer.assign()
        self.assertEqual((await peer.tool_call("call_1", "late_refuse"))["result"], {"accepted": True})
        r = await peer.next("tool.result")
        self.assertEqual(
            r["params"],
            {"session_id": "sesn_1", "tool_call_id": "call_1", "content": [{"type": "text", "text": "disk gone"}], "is_error": True, "error_code": "workspace_unavailable"},
        )

    async def test_timeout_ms(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        await peer.assign()
        ack = await peer.request("tool.call", {"session_id": "sesn_1", "lease_id": "lease_1", "tool_call_id": "c", "name": "slow", "input": {}, "timeout_ms": 50})
        self.assertEqual(ack["result"], {"accepted": True})
        r = await peer.next("tool.result")
        self.assertEqual(r["params"]["error_code"], "timeout")

    async def test_refusals_with_codes(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        self.assertEqual((await peer.tool_call("c", "echo"))["error"]["code"], -32007)
        self.assertFalse((await peer.assign(["bash"]))["result"]["accepted"])
        await peer.assign()
        self.assertEqual((await peer.tool_call("c", "echo", lease="lease_old"))["error"]["code"], -32003)
        e = (await peer.tool_call("c", "bash"))["error"]
        self.assertEqual((e["code"], e["data"]["capability"]), (-32012, "tool:bash"))
        self.assertEqual((await peer.request("no.such", {}))["error"]["code"], -32601)

    async def test_cancel_reaches_the_handler(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        peer = await hub.peer(1)
        await peer.assign()
        self.assertEqual((await peer.tool_call("call_1", "slow"))["result"], {"accepted": True})
        await peer.send({"jsonrpc": "2.0", "method": "tool.cancel", "params": {"session_id": "sesn_1", "tool_call_id": "call_1", "reason": "canceled"}})
        r = await peer.next("tool.result")
        self.assertEqual((r["params"]["is_error"], r["params"]["error_code"]), (True, "canceled"))
        self.assertTrue(any(e.type == "tool_canceled" and e.tool_call_id == "call_1" for e in self.events))

    async def test_result_resent_after_reconnect(self) -> None:
        hub = FakeHub(features=[])
        await self.start(hub)
        first = await hub.peer(1)
        first.answer_results = False
        await first.assign()
        await first.tool_call("call_1", "echo", {"text": "once"})
        await first.next("tool.result")
        await first.ws.close(4005, "drained")
        second = await hub.peer(2)
        self.assertEqual(second.register_params["sessions"], [{"session_id": "sesn_1", "lease_id": "lease_1"}])
        r = await second.next("tool.result")
        self.assertEqual((r["params"]["tool_call_id"], r["params"]["content"][0]["text"]), ("call_1", "echo once"))

    async def test_4001_new_token_at_once(self) -> None:
        hub = FakeHub()
        await self.start(hub)
        first = await hub.peer(1)
        await first.ws.close(4001, "token expired")
        second = await hub.peer(2)
        self.assertEqual(hub.tokens, 2)
        self.assertEqual(second.auth, "Bearer tok2")

    async def test_4004_replaced(self) -> None:
        hub = FakeHub()
        client, task = await self.start(hub)
        peer = await hub.peer(1)
        await peer.ws.close(4004, "replaced by a newer connection")
        err = await self.ended(task)
        self.assertIsInstance(err, ReplacedError)
        self.assertIsInstance(err, ClientStoppedError)
        self.assertEqual(err.close_code, 4004)
        self.assertIs(client.error, err)
        with self.assertRaises(ClientStoppedError):
            await client.call("x", {})

    async def test_credential_rejected(self) -> None:
        hub = FakeHub(token_status=401)
        _, task = await self.start(hub)
        err = await self.ended(task)
        self.assertIsInstance(err, CredentialRejectedError)
        assert isinstance(err, CredentialRejectedError)
        self.assertEqual(err.status, 401)
        self.assertIn("revoked", str(err))

    async def test_reconnect_exhausted(self) -> None:
        hub = FakeHub(token_status=503)
        _, task = await self.start(hub, max_reconnect_attempts=2)
        err = await self.ended(task)
        self.assertIsInstance(err, ReconnectExhaustedError)
        assert isinstance(err, ReconnectExhaustedError)
        self.assertEqual(err.attempts, 3)

    async def test_registration_refused(self) -> None:
        hub = FakeHub(refuse=True)
        _, task = await self.start(hub)
        err = await self.ended(task)
        self.assertIsInstance(err, RegistrationRefusedError)
        self.assertEqual(len(hub.peers), 3)

    async def test_stop(self) -> None:
        hub = FakeHub()
        client, task = await self.start(hub)
        await hub.peer(1)
        client.stop()
        err = await self.ended(task)
        self.assertIsInstance(err, ClientStoppedError)
        assert isinstance(err, ClientStoppedError)
        self.assertIsNone(err.close_code)


if __name__ == "__main__":
    unittest.main()
