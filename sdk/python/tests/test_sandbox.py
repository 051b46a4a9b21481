"""The built-in bash tool runs in a bubblewrap sandbox unless told not to."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import unittest

from reins_executor import SandboxUnavailableError, ToolContext, ToolResult, bash_tool, run_command


def text(r: ToolResult) -> str:
    return "".join(c.get("text", "") for c in r.content)


# A stand-in for bwrap that leaves its sandbox unbound (see the file).
_UNBOUND_BWRAP = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "unbound-bwrap.py")


class SandboxTest(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        # A session directory a root executor's sandbox (nobody) can reach.
        self.root = tempfile.mkdtemp(prefix="reins-py-sandbox-")
        os.chmod(self.root, 0o711)
        self.addCleanup(shutil.rmtree, self.root, True)
        self.n = 0

    def ctx(self, *, env: dict[str, str] | None = None, read_only: bool = False) -> ToolContext:
        self.n += 1
        cwd = os.path.join(self.root, f"s{self.n}")
        os.mkdir(cwd, 0o700)
        return ToolContext(f"s{self.n}", "c", env or {}, cwd, read_only, asyncio.Event())

    async def test_sandboxed_by_default(self) -> None:
        os.environ["REINS_PY_TEST_SECRET"] = "py-sandbox-secret-1"
        self.addCleanup(os.environ.pop, "REINS_PY_TEST_SECRET")
        ctx = self.ctx(env={"SESSION_VAR": "given"})
        r = await bash_tool()({"command": f"id -u; cat /etc/shadow; cat /proc/{os.getpid()}/environ; cat /proc/1/environ; "
                                          "env; pwd; echo made > out.txt"}, ctx)
        out = text(r)
        self.assertNotIn("root:", out)
        self.assertNotIn("py-sandbox-secret-1", out)
        self.assertEqual(out.split("\n")[0], "1000", out)
        self.assertIn("No such file or directory", out)
        self.assertIn("SESSION_VAR=given", out)
        self.assertIn("\n/workspace\n", out)
        with open(os.path.join(ctx.cwd, "out.txt")) as f:
            self.assertEqual(f.read(), "made\n")

    async def test_no_network(self) -> None:
        srv = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(srv.close)

        def serve() -> None:
            try:
                c, _ = srv.accept()
                c.sendall(b"host-listener\n")
                c.close()
            except OSError:
                pass

        threading.Thread(target=serve, daemon=True).start()
        port = srv.getsockname()[1]
        r = await bash_tool()({"command": f"(exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3) 2>&1 || echo refused"}, self.ctx())
        self.assertNotIn("host-listener", text(r))
        self.assertIn("refused", text(r))

    async def test_read_only_session(self) -> None:
        r = await bash_tool()({"command": "echo x > f.txt"}, self.ctx(read_only=True))
        self.assertTrue(r.is_error)
        self.assertIn("Read-only file system", text(r))

    async def test_cancel_kills_the_sandbox(self) -> None:
        tag = str(random.randrange(1_000_000, 2_000_000))
        task = asyncio.create_task(bash_tool()({"command": f"(setsid sleep {tag} &); sleep {tag}"}, self.ctx()))
        await asyncio.sleep(0.5)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)
        await asyncio.sleep(0.3)
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        self.assertNotIn(f"sleep {tag}", ps, "a process of the cancelled sandbox survived")

    async def test_cancel_kills_a_sandbox_bwrap_has_not_bound_yet(self) -> None:
        # bwrap's first sandbox process dies with bwrap only once its setup
        # is done (PR_SET_PDEATHSIG comes last); a cancel that killed bwrap
        # before then left the command running with the output pipe open,
        # and the cancel hung until the command ended. This stand-in for
        # bwrap starts its sandbox unbound and reports it as bwrap does.
        fake = os.path.join(self.root, "bwrap")  # where a root test's nobody can run it
        shutil.copyfile(_UNBOUND_BWRAP, fake)
        os.chmod(fake, 0o755)
        tag = str(random.randrange(1_000_000, 2_000_000))
        self.addCleanup(subprocess.run, ["pkill", "-KILL", "-f", f"sleep {tag}"])
        task = asyncio.create_task(bash_tool(bwrap=fake)({"command": f"sleep {tag}"}, self.ctx()))
        await asyncio.sleep(0.5)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=10)
        self.assertIn(task, done, "the cancel waits for a command bwrap had not bound to its life")
        with self.assertRaises(asyncio.CancelledError):
            task.result()
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        self.assertNotIn(f"sleep {tag}", ps, "the sandbox's command survived the cancel")

    async def test_run_command_in_the_same_sandbox(self) -> None:
        ctx = self.ctx()
        await bash_tool()({"command": 'printf "one\\ntwo\\n" > notes.txt'}, ctx)
        r = await run_command(["cat", "-n", "--", "notes.txt"], ctx)
        self.assertRegex(text(r), r"1\tone\n\s+2\ttwo")
        self.assertTrue((await run_command(["cat", "--", "/etc/shadow"], ctx)).is_error)

    def test_unavailable_refuses_and_names_the_opt_out(self) -> None:
        with self.assertRaises(SandboxUnavailableError) as cm:
            bash_tool(bwrap="/nonexistent/bwrap")
        self.assertIn("unconfined=True", str(cm.exception))
        self.assertIn("bubblewrap", str(cm.exception))

    async def test_unconfined_opt_out(self) -> None:
        r = await bash_tool(unconfined=True)({"command": "id -u"}, self.ctx())
        self.assertEqual(text(r).strip(), str(os.geteuid()))


if __name__ == "__main__":
    unittest.main()
