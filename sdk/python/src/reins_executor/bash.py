"""A bash tool: runs the command with bash in the session's sandbox."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from .client import ToolContext, ToolResult
from .sandbox import check_sandbox, run_command


def bash_tool(shell: str = "bash", env: dict[str, str] | None = None, *, unconfined: bool = False,
              host_network: bool = False, bwrap: str = "bwrap") -> Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]:
    """A handler for a ``bash`` tool ({"command": "..."}) that runs the command
    with ``bash -c`` through :func:`run_command`: in a bubblewrap sandbox of its
    own with the session's directory as ``/workspace`` and the session's
    variables added to its environment, killed when the call is cancelled.

    It raises :class:`SandboxUnavailableError` at once when the sandbox cannot
    start here; ``unconfined=True`` runs the commands on this host instead, in
    ``ctx.cwd``, with this process's environment (or ``env``)."""
    check_sandbox(unconfined=unconfined, host_network=host_network, bwrap=bwrap)

    async def run(input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = input.get("command")
        if not isinstance(command, str) or not command:
            return ToolResult.text("command is required", is_error=True)
        return await run_command([shell, "-c", command], ctx, unconfined=unconfined, host_network=host_network,
                                 bwrap=bwrap, env=env)

    return run
