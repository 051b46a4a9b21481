"""Executor SDK for reins: run the tools of agent sessions on your own machine.

The protocol (reins.executor.v1) is described in docs/executor.md of the
reins repository; this package is its executor end, on asyncio and
websockets.
"""

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
    ToolOutcomeUnknownError,
    code_message,
)

__all__ = [
    "SUBPROTOCOL",
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
    "ReplacedError",
    "RequestTimeoutError",
    "SessionEndedError",
    "Token",
    "ToolContext",
    "ToolHandler",
    "ToolOutcomeUnknownError",
    "ToolResult",
    "bash_tool",
    "code_message",
    "connect_url",
    "reconnect_delay",
]
