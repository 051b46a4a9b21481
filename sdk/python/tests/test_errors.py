import unittest

import reins_executor
from reins_executor import (
    AssignRejectedError,
    ClientStoppedError,
    ErrorCode,
    ExecutorError,
    NotConnectedError,
    RPCError,
    SessionEndedError,
    ToolOutcomeUnknownError,
    code_message,
)


class ErrorsTest(unittest.TestCase):
    def test_codes(self) -> None:
        table = {
            -32700: "parse_error",
            -32600: "invalid_request",
            -32601: "method_not_found",
            -32602: "invalid_params",
            -32603: "internal_error",
            -32000: "unauthorized",
            -32001: "forbidden",
            -32002: "not_found",
            -32003: "lease_expired",
            -32004: "timeout",
            -32005: "canceled",
            -32006: "payload_too_large",
            -32007: "session_not_active",
            -32008: "mcp_unavailable",
            -32009: "executor_busy",
            -32010: "unsupported_protocol",
            -32011: "resource_unavailable",
            -32012: "capability_unavailable",
            -32013: "conflict",
        }
        self.assertEqual(len(ErrorCode), len(table))
        for code, message in table.items():
            self.assertEqual(code_message(code), message)
            self.assertEqual(RPCError(code, "").message, message)
        self.assertEqual(code_message(-1), "")

    def test_rpc_error(self) -> None:
        e = RPCError.with_reason(-32011, "workspace_unavailable", "disk full")
        self.assertIsInstance(e, ExecutorError)
        self.assertEqual((e.code, e.message, e.reason, e.retryable), (-32011, "disk full", "workspace_unavailable", True))
        self.assertEqual(e.to_wire(), {"code": -32011, "message": "disk full", "data": {"retryable": True, "reason": "workspace_unavailable"}})
        self.assertIsNone(RPCError(-32601, "").retryable)
        self.assertEqual(RPCError(-32601, "").to_wire(), {"code": -32601, "message": "method_not_found"})
        self.assertFalse(RPCError(-32009, "", {"retryable": False}).retryable)
        back = RPCError.from_wire({"code": -32012, "message": "x", "data": {"capability": "tool:read", "extra": 1}})
        self.assertEqual(back.data, {"capability": "tool:read", "extra": 1})

    def test_seed_classes(self) -> None:
        self.assertEqual(str(NotConnectedError()), "executor channel is not connected")
        self.assertEqual(str(ClientStoppedError()), "client stopped")
        self.assertEqual(str(SessionEndedError()), "session ended")
        self.assertIn("tool outcome unknown", str(ToolOutcomeUnknownError()))
        self.assertEqual(str(AssignRejectedError()), "executor rejected session.assign")
        for cls in (NotConnectedError, ClientStoppedError, SessionEndedError, ToolOutcomeUnknownError, AssignRejectedError, RPCError):
            self.assertTrue(issubclass(cls, ExecutorError))

    def test_no_close_code_helper(self) -> None:
        # As the protocol's error page says of the Python SDK: no
        # is_terminal_close_code; errors carry close_code instead.
        self.assertFalse(hasattr(reins_executor, "is_terminal_close_code"))


if __name__ == "__main__":
    unittest.main()
