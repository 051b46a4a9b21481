"""The agent end, and the harness errors the ends raise, against the fake harness."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any

from test_client import FakeHub, Peer, _quiet, run_client, serve_json

from reins_executor import (
    AssignRejectedError,
    ExecutorClient,
    RPCError,
    SessionEndedError,
    ToolCallHTTPError,
    ToolOutcomeUnknownError,
    Turn,
    mcp_unavailable,
)


async def turn_start(peer: Peer, **extra: Any) -> dict[str, Any]:
    return await peer.request("turn.start", {"session_id": "sesn_1", "turn_id": "turn_1", "inputs": [{"type": "user.message"}], "transcript": [], **extra})


async def answer_next(peer: Peer, method: str, **answer: Any) -> dict[str, Any]:
    m = await peer.next(method)
    await peer.send({"jsonrpc": "2.0", "id": m["id"], **answer})
    return m


class ToolsEndpoint:
    """POST …/tool_calls answered with (status, body) in order, on a thread."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.seen: list[dict[str, Any]] = []

        def handle(headers: Any, body: bytes) -> tuple[int, Any]:
            self.seen.append({"auth": headers["Authorization"], "key": headers["Idempotency-Key"], "body": json.loads(body)})
            return answers.pop(0) if answers else (500, {})

        self.http, base = serve_json(handle)
        self.url = base + "/v1/sessions/sesn_1/tool_calls"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class AgentTest(unittest.IsolatedAsyncioTestCase):
    async def agent_end(self, hub: FakeHub, **kw: Any) -> tuple[ExecutorClient, asyncio.Queue[Turn]]:
        await hub.start()
        turns: asyncio.Queue[Turn] = asyncio.Queue()

        async def run(turn: Turn) -> None:
            await turns.put(turn)
            await turn.canceled.wait()

        opts: dict[str, Any] = {"machine_token": "reins_mt_test", "name": "brain", "backoff_min": 0.01, "backoff_max": 0.02, "logger": _quiet, "agent": run}
        opts.update(kw)
        client, _ = run_client(self, hub, opts)
        return client, turns

    async def test_turn_events_sequences_and_end(self) -> None:
        hub = FakeHub()
        _, turns = await self.agent_end(hub)
        peer = await hub.peer(1)
        self.assertEqual(peer.register_params["capabilities"], ["agent"])
        self.assertNotIn("features", peer.register_params)  # no transcript_deltas: whole transcripts
        self.assertEqual((await turn_start(peer))["result"], {"accepted": True})
        turn = await asyncio.wait_for(turns.get(), 5)
        self.assertEqual(turn.session_id, "sesn_1")

        sent = asyncio.ensure_future(turn.send({"type": "agent.message"}, {"type": "agent.thinking"}))
        first = await answer_next(peer, "session.event", result={"next_sequence": 2})
        await sent
        self.assertEqual(first["params"]["sequence"], 0)
        self.assertEqual(len(first["params"]["events"]), 2)

        gap = asyncio.ensure_future(turn.send({"type": "agent.message"}))
        await answer_next(peer, "session.event", error={"code": -32013, "message": "conflict", "data": {"expected_sequence": 5}})
        with self.assertRaises(RPCError) as cm:
            await gap
        self.assertEqual(cm.exception.code, -32013)
        self.assertEqual(turn.next_sequence, 5)
        end = asyncio.ensure_future(turn.end_turn())
        last = await answer_next(peer, "session.event", result={"next_sequence": 6})
        await end
        self.assertEqual(last["params"]["sequence"], 5)
        self.assertEqual(last["params"]["events"], [{"type": "turn.end"}])

        late = asyncio.ensure_future(turn.send({"type": "agent.message"}))
        await answer_next(peer, "session.event", error={"code": -32007, "message": "session_not_active", "data": {"reason": "turn_inactive"}})
        with self.assertRaises(SessionEndedError) as ended:
            await late
        self.assertEqual(ended.exception.reason, "turn_inactive")
        self.assertIsInstance(ended.exception.__cause__, RPCError)

    async def test_refreshes_and_cancel(self) -> None:
        hub = FakeHub()
        _, turns = await self.agent_end(hub)
        peer = await hub.peer(1)
        await turn_start(peer, tools={"url": "http://x/v1/sessions/sesn_1/tool_calls", "token": "rtt_1", "expires_at": "2000-01-01T00:00:00Z"})
        turn = await asyncio.wait_for(turns.get(), 5)
        fresh = asyncio.ensure_future(turn.refresh_tools_token())
        req = await answer_next(peer, "tools_token.refresh", result={"token": "rtt_2", "expires_at": "2099-01-01T00:00:00Z"})
        self.assertEqual(req["params"], {"session_id": "sesn_1", "turn_id": "turn_1"})
        self.assertEqual((await fresh)["token"], "rtt_2")
        self.assertEqual(turn.start["tools"]["url"], "http://x/v1/sessions/sesn_1/tool_calls")
        model = asyncio.ensure_future(turn.refresh_model_token())
        await answer_next(peer, "model_token.refresh", error={"code": -32011, "message": "resource_unavailable", "data": {"reason": "model_token_unavailable"}})
        with self.assertRaises(RPCError) as cm:
            await model
        self.assertEqual(cm.exception.reason, "model_token_unavailable")

        await peer.send({"jsonrpc": "2.0", "method": "turn.cancel", "params": {"session_id": "sesn_1", "turn_id": "turn_1", "reason": "interrupt"}})
        await asyncio.wait_for(turn.canceled.wait(), 5)
        self.assertEqual(turn.cancel_reason, "interrupt")

    async def test_accept_turn_refuses_with_mcp_unavailable(self) -> None:
        hub = FakeHub()
        ran = []

        async def run(turn: Turn) -> None:
            ran.append(turn)

        def accept(start: dict[str, Any]) -> None:
            raise mcp_unavailable(start["agent"]["mcp_servers"][0]["name"], "connection refused")

        await self.agent_end(hub, agent=run, accept_turn=accept)
        peer = await hub.peer(1)
        res = await turn_start(peer, agent={"mcp_servers": [{"name": "tools", "url": "http://127.0.0.1:1"}]})
        err = res["error"]
        self.assertEqual((err["code"], err["message"]), (-32008, "mcp_unavailable"))
        self.assertEqual((err["data"]["reason"], err["data"]["mcp_server_name"], err["data"]["retryable"]), ("mcp_connection_failed_error", "tools", True))
        self.assertIn("connection refused", err["data"]["detail"])
        self.assertEqual(ran, [])

    async def test_no_agent_handler_is_capability_unavailable(self) -> None:
        hub = FakeHub()
        await self.agent_end(hub, agent=None, tools={"echo": lambda i, c: "x"}, machine_token=None, environment_key="k")
        peer = await hub.peer(1)
        err = (await turn_start(peer))["error"]
        self.assertEqual((err["code"], err["data"]["capability"]), (-32012, "agent"))

    async def test_call_tool(self) -> None:
        ep = ToolsEndpoint(
            [
                (401, {"type": "error", "error": {"type": "authentication_error", "message": "the tools token expired"}}),
                (200, {"tool_call_id": "sevt_1", "status": "in_progress", "content": [], "is_error": True, "error_code": "in_progress"}),
                (200, {"tool_call_id": "sevt_1", "status": "completed", "content": [{"type": "text", "text": "hi\n"}], "is_error": False}),
                (409, {"type": "error", "error": {"type": "invalid_request_error", "message": "turn_inactive: the turn is not running"}}),
                (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "input: not an object"}}),
            ]
        )
        self.addCleanup(ep.close)
        hub = FakeHub()
        _, turns = await self.agent_end(hub)
        peer = await hub.peer(1)
        await turn_start(peer, tools={"url": ep.url, "token": "rtt_1", "expires_at": "2099-01-01T00:00:00Z"})
        turn = await asyncio.wait_for(turns.get(), 5)
        call = asyncio.ensure_future(turn.call_tool("bash", {"command": "echo hi"}))
        await answer_next(peer, "tools_token.refresh", result={"token": "rtt_2", "expires_at": "2099-01-01T00:00:00Z"})
        res = await asyncio.wait_for(call, 10)
        self.assertEqual(res.text, "hi\n")
        self.assertEqual([s["auth"] for s in ep.seen], ["Bearer rtt_1", "Bearer rtt_2", "Bearer rtt_2"])
        self.assertEqual(len({s["key"] for s in ep.seen}), 1)
        self.assertEqual(ep.seen[0]["body"], {"name": "bash", "input": {"command": "echo hi"}})

        with self.assertRaises(SessionEndedError) as ended:
            await turn.call_tool("bash", {})
        self.assertEqual(ended.exception.reason, "turn_inactive")
        self.assertIsInstance(ended.exception.__cause__, ToolCallHTTPError)
        with self.assertRaises(ToolCallHTTPError) as bad:
            await turn.call_tool("bash", 1)
        self.assertEqual(bad.exception.status, 400)
        turn.start["tools"]["url"] = "http://127.0.0.1:1/v1/sessions/sesn_1/tool_calls"  # nothing listens
        with self.assertRaises(ToolOutcomeUnknownError) as lost:
            await turn.call_tool("bash", {}, idempotency_key="k-1")
        self.assertEqual(lost.exception.idempotency_key, "k-1")

    async def test_executor_end_session_ended_and_assign_rejected(self) -> None:
        hub = FakeHub()
        events: list[Any] = []

        def on_assign(a: dict[str, Any]) -> None:
            if a["session_id"] == "sesn_no":
                raise AssignRejectedError("session_rejected", "not this one")

        client, _ = await self.agent_end(
            hub, agent=None, machine_token=None, environment_key="k", tools={"echo": lambda i, c: "x"}, on_assign=on_assign, on_event=events.append
        )
        peer = await hub.peer(1)
        res = await peer.request("session.assign", {"session_id": "sesn_no", "lease_id": "l", "tools": [], "workspace": {}})
        self.assertEqual(res["result"], {"accepted": False, "reason": "session_rejected", "message": "not this one"})
        res = await peer.request("session.assign", {"session_id": "sesn_2", "lease_id": "l", "tools": ["bash"], "workspace": {}})
        self.assertEqual(res["result"]["reason"], "session_rejected")
        rejected = [e for e in events if e.type == "session_rejected"]
        self.assertEqual(len(rejected), 2)
        self.assertTrue(all(isinstance(e.error, AssignRejectedError) and e.error.reason == "session_rejected" for e in rejected))

        peer.answer_results = False
        call = asyncio.ensure_future(client.call("tool.result", {"session_id": "sesn_gone", "tool_call_id": "c", "content": []}))
        await answer_next(peer, "tool.result", error={"code": -32007, "message": "session_not_active"})
        with self.assertRaises(SessionEndedError):
            await call


if __name__ == "__main__":
    unittest.main()
