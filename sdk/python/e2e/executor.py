"""The executor the reins e2e tests drive (internal/e2e/sdkexecutor_test.go):
bash, a custom read and a write that always refuses with a typed error. It
prints one JSON line per event and, at the end, the error it ended with."""

import asyncio
import json
import os
import signal
import sys

from reins_executor import ExecutorClient, RPCError, ToolContext, bash_tool


def out(**kw: object) -> None:
    print(json.dumps({k: v for k, v in kw.items() if v is not None}), flush=True)


async def main() -> None:
    url, key, name, workspace = sys.argv[1:5]
    bash = bash_tool()

    async def bash_with_report(input: dict, ctx: ToolContext):
        try:
            return await bash(input, ctx)
        except asyncio.CancelledError:
            out(event="aborted", tool_call_id=ctx.tool_call_id)
            raise

    def read(input: dict, ctx: ToolContext) -> str:
        with open(os.path.join(ctx.cwd, os.path.normpath("/" + input["file_path"]).lstrip("/"))) as f:
            return f.read()

    def write(input: dict, ctx: ToolContext) -> str:
        raise RPCError.with_reason(-32001, "workspace_read_only", "this executor refuses writes")

    client = ExecutorClient(
        url,
        environment_key=key,
        name=name,
        workspace=workspace,
        backoff_min=0.05,
        backoff_max=0.3,
        tools={"bash": bash_with_report, "read": read, "write": write},
        on_event=lambda e: out(event=e.type, tool_call_id=e.tool_call_id, tool=e.tool, reason=e.reason),
    )
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, client.stop)
    try:
        await client.run()
    except Exception as e:
        out(ended=type(e).__name__, close_code=getattr(e, "close_code", None) or -1, message=str(e))


asyncio.run(main())
