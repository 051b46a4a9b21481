"""The agent end the reins e2e tests drive (internal/e2e/sdkagentend_test.go):
each turn answers the user's message, replays its first batch (refused with
-32013), refreshes its tokens, runs bash through the platform tools endpoint,
reports the output and ends the turn; a turn whose message is "wait" waits
for its cancellation. It prints one JSON line per event."""

import asyncio
import json
import signal
import sys

from reins_executor import ExecutorClient, RPCError, Turn


def out(**kw: object) -> None:
    print(json.dumps({k: v for k, v in kw.items() if v is not None}), flush=True)


def message(text: str) -> dict:
    return {"type": "agent.message", "content": [{"type": "text", "text": text}]}


def said(turn: Turn) -> str:
    for ev in turn.start["inputs"]:
        if ev.get("type") == "user.message" and ev.get("content"):
            return str(ev["content"][0].get("text", ""))
    return ""


async def main() -> None:
    url, token, name = sys.argv[1:4]
    client: ExecutorClient

    async def run_turn(turn: Turn) -> None:
        words = said(turn)
        out(event="turn", text=words, transcript=len(turn.start.get("transcript") or []))
        if words == "wait":
            try:  # turn.cancel may overtake the answer to this send
                await turn.send(message("waiting"))
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                out(event="turn_canceled", reason=turn.cancel_reason)
                raise
        await turn.send(message(f"You said: {words}"))
        # The same batch again (an agent end that lost the answer): refused.
        try:
            await client.call("session.event", {"session_id": turn.session_id, "turn_id": turn.turn_id, "sequence": 0, "events": [message("replayed")]})
            out(event="replay_accepted")
        except RPCError as e:
            out(event="replay_refused", code=e.code, expected_sequence=(e.data or {}).get("expected_sequence"))
        grant = await turn.refresh_tools_token()
        out(event="tools_token", ok=grant["token"].startswith("rtt_"))
        try:
            await turn.refresh_model_token()
        except RPCError as e:
            out(event="model_token_refused", error=type(e).__name__, reason=e.reason)
        res = await turn.call_tool("bash", {"command": f"echo {words}"})
        out(event="tool_result", text=res.text, error_code=res.error_code)
        await turn.send(message(f"bash said: {res.text.strip()}"))
        await turn.end_turn()
        try:
            await turn.send(message("late"))
        except Exception as e:  # noqa: BLE001 - reported
            out(event="late_send", error=type(e).__name__, reason=getattr(e, "reason", None))

    async def agent(turn: Turn) -> None:
        try:
            await run_turn(turn)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - reported
            out(event="turn_failed", error=type(e).__name__, message=str(e))

    client = ExecutorClient(
        url, machine_token=token, name=name, backoff_min=0.05, backoff_max=0.3, agent=agent, on_event=lambda e: out(event=e.type)
    )
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, client.stop)
    try:
        await client.run()
    except Exception as e:  # noqa: BLE001 - reported
        out(ended=type(e).__name__, message=str(e))


asyncio.run(main())
