"""A bash tool: runs the command with bash in the session's directory."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Awaitable, Callable

from .client import ToolContext, ToolResult

_MAX_OUTPUT = 100 * 1024  # bytes kept per result: the head and the tail


def bash_tool(shell: str = "bash", env: dict[str, str] | None = None) -> Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]:
    """A handler for a ``bash`` tool ({"command": "..."}) that runs the command
    with ``bash -c`` in ``ctx.cwd`` (the session's directory), with the
    session's variables added to the environment, and kills its process group
    when the call is cancelled. It does not sandbox anything: run the executor
    where model-written commands can do no harm (a container or VM)."""

    async def run(input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = input.get("command")
        if not isinstance(command, str) or not command:
            return ToolResult.text("command is required", is_error=True)
        proc = await asyncio.create_subprocess_exec(
            shell,
            "-c",
            command,
            cwd=ctx.cwd or None,
            env={**(env if env is not None else os.environ), **ctx.env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = await proc.communicate()
        except asyncio.CancelledError:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
            raise
        text = _cap(out).decode("utf-8", "replace")
        if proc.returncode != 0:
            text += f"\n(exit {proc.returncode})"
        return ToolResult.text(text or "(no output)", is_error=proc.returncode != 0)

    return run


def _cap(b: bytes) -> bytes:
    if len(b) <= _MAX_OUTPUT:
        return b
    half = _MAX_OUTPUT // 2
    return b[:half] + f"\n[output truncated: {len(b) - 2 * half} bytes omitted]\n".encode() + b[-half:]
