"""Executor SDK for reins: run the tools of agent sessions on your own machine.

The protocol (reins.executor.v1) is described in docs/executor.md of the
reins repository; this package is its executor end and its agent end, on
asyncio and websockets.
"""

from .agent import EVENT_TURN_END, AcceptTurn, AgentHandler, PlatformToolResult, Turn
from .bash import bash_tool
from .client import SUBPROTOCOL, Event, ExecutorClient, Token, ToolContext, ToolHandler, ToolResult, connect_url, reconnect_delay
from .errors import (
    AssignRejectedError,
    ClientStoppedError,
    CloseCode,
    ConnectionClosedError,
    CredentialRejectedError,
    ErrorCode,
    ExecutorError,
    NotConnectedError,
    ReconnectExhaustedError,
    RegistrationRefusedError,
    ReplacedError,
    RequestTimeoutError,
    RPCError,
    SessionEndedError,
    ToolCallHTTPError,
    ToolOutcomeUnknownError,
    code_message,
    mcp_unavailable,
)
from .sandbox import SANDBOX_WORKSPACE, SandboxUnavailableError, check_sandbox, run_command

__all__ = [
    "SANDBOX_WORKSPACE",
    "EVENT_TURN_END",
    "SUBPROTOCOL",
    "AcceptTurn",
    "AgentHandler",
    "PlatformToolResult",
    "ToolCallHTTPError",
    "Turn",
    "mcp_unavailable",
    "AssignRejectedError",
    "ClientStoppedError",
    "CloseCode",
    "ConnectionClosedError",
    "CredentialRejectedError",
    "ErrorCode",
    "Event",
    "ExecutorClient",
    "ExecutorError",
    "NotConnectedError",
    "RPCError",
    "ReconnectExhaustedError",
    "RegistrationRefusedError",
    "SandboxUnavailableError",
    "ReplacedError",
    "RequestTimeoutError",
    "SessionEndedError",
    "Token",
    "ToolContext",
    "ToolHandler",
    "ToolOutcomeUnknownError",
    "ToolResult",
    "bash_tool",
    "check_sandbox",
    "code_message",
    "connect_url",
    "reconnect_delay",
    "run_command",
]
