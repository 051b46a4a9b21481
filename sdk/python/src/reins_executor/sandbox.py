"""The sandbox the SDK's built-in tools run commands in: bubblewrap (bwrap)
with new user, PID, IPC, UTS and network namespaces."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from typing import Any

from .client import ToolContext, ToolResult

SANDBOX_WORKSPACE = "/workspace"
"""Where the session's directory is inside the sandbox (the command's working directory)."""

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_UID = 1000  # the user commands run as inside
_NOBODY = 65534  # the host user a root executor runs sandboxes as
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The parts of the host's /etc that programs need: not shadow, not the host's keys.
_ETC = (
    "alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version", "fonts", "gai.conf",
    "host.conf", "inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic",
    "magic.mime", "mime.types", "nsswitch.conf", "os-release", "perl", "profile", "protocols", "python3", "rpc",
    "services", "ssl/certs", "ssl/openssl.cnf", "terminfo", "timezone", "xdg",
)
_HOST_NETWORK_ETC = ("resolv.conf", "hosts")
_PASSWD = f"root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:{_UID}:{_UID}:user:{SANDBOX_WORKSPACE}:/bin/bash\n".encode()
_GROUP = f"root:x:0:\nuser:x:{_UID}:\n".encode()
_MAX_OUTPUT = 100 * 1024  # bytes kept per result: the head and the tail


class SandboxUnavailableError(RuntimeError):
    """The sandbox cannot start on this host and the caller did not opt out."""


def _bwrap_args(host_network: bool, workspace_fd: int | None, read_only: bool, users: tuple[int, int] | None) -> list[str]:
    a = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--disable-userns",
         "--uid", str(_UID), "--gid", str(_UID), "--hostname", "reins", "--die-with-parent", "--new-session"]
    if not host_network:
        a.append("--unshare-net")
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            a += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            a += ["--ro-bind", d, d]
    for e in _ETC + (_HOST_NETWORK_ETC if host_network else ()):
        p = os.path.join("/etc", e)
        if os.path.lexists(p):
            a += ["--ro-bind", p, p]
    if users is not None:
        a += ["--ro-bind-data", str(users[0]), "/etc/passwd", "--ro-bind-data", str(users[1]), "/etc/group"]
    a += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    if workspace_fd is not None:
        a += ["--ro-bind-fd" if read_only else "--bind-fd", str(workspace_fd), SANDBOX_WORKSPACE]
    else:
        a += ["--dir", SANDBOX_WORKSPACE]
    return a + ["--chdir", SANDBOX_WORKSPACE]


def _sandbox_env(env: dict[str, str] | None, session: dict[str, str]) -> dict[str, str]:
    """The environment bwrap starts with; the sandbox's processes (its pid 1 too) see exactly this."""
    return {"PATH": _PATH, "HOME": SANDBOX_WORKSPACE, "USER": "user", "LOGNAME": "user", "LANG": "C.UTF-8",
            **(env or {}), **session}


def _host_user() -> dict[str, Any]:
    """A root executor runs its sandboxes as nobody, like reins's own sandboxes."""
    return {"user": _NOBODY, "group": _NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}


_checked: dict[tuple[str, bool], str] = {}  # (bwrap, host_network) → "" or why it failed


def check_sandbox(*, unconfined: bool = False, host_network: bool = False, bwrap: str = "bwrap") -> None:
    """Starts a sandbox (once per bwrap program and network setting) and raises
    :class:`SandboxUnavailableError`, saying why and how to opt out, when it
    cannot start: bwrap missing, or user namespaces disabled."""
    if unconfined:
        return
    key = (bwrap, host_network)
    why = _checked.get(key)
    if why is None:
        try:
            r = subprocess.run([bwrap, *_bwrap_args(host_network, None, False, None), "--", "true"],
                               env=_sandbox_env(None, {}), cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=10, **_host_user())
            why = "" if r.returncode == 0 else f"{bwrap} exited {r.returncode}: {r.stderr.decode(errors='replace').strip()}"
        except (OSError, subprocess.SubprocessError) as e:
            why = str(e)
        _checked[key] = why
    if why:
        raise SandboxUnavailableError(
            f"the sandbox of the built-in tools cannot start: {why}. Install bubblewrap (apt-get install bubblewrap) "
            "on a kernel with unprivileged user namespaces, or pass unconfined=True to run commands on this host "
            "without a sandbox (only where model-written commands can do no harm)")


def _give_to_nobody(d: str) -> str:
    """Readies the session's directory for a sandbox that a root executor runs
    as nobody: nobody must be able to reach it (bwrap resolves it by its path),
    and it and what is in it become nobody's. Returns why the sandbox cannot
    use it, or ""."""
    real = os.path.realpath(d)
    p = real
    while p != "/":
        p = os.path.dirname(p)
        st = os.stat(p)
        bit = 0o100 if st.st_uid == _NOBODY else 0o010 if st.st_gid == _NOBODY else 0o001
        if not st.st_mode & bit:
            return (f"the sandbox cannot reach the session's directory: this executor runs as root, so its sandboxes "
                    f"run as nobody (uid {_NOBODY}), who cannot enter {p}. Put the workspace where nobody can reach it "
                    "(every directory above it searchable by others, e.g. under /srv), or run the executor as an "
                    "unprivileged user")
    if os.lstat(real).st_uid != _NOBODY:
        os.lchown(real, _NOBODY, _NOBODY)
        for root, dirs, files in os.walk(real):
            for name in dirs + files:
                os.lchown(os.path.join(root, name), _NOBODY, _NOBODY)
    return ""


async def run_command(argv: list[str], ctx: ToolContext, *, unconfined: bool = False, host_network: bool = False,
                      bwrap: str = "bwrap", env: dict[str, str] | None = None) -> ToolResult:
    """Runs ``argv`` for a tool call and returns its output (stdout and stderr,
    100 KiB at most) as the result, an error result when it exits non-zero.

    By default it runs in a bubblewrap sandbox of its own: new user, PID, IPC,
    UTS and network namespaces, the host's ``/usr`` read-only, a few files of
    ``/etc`` (no ``/etc/shadow``), a fresh ``/proc`` that shows only the
    sandbox's processes, a private ``/tmp``, the session's directory writable
    (read-only for a read-only session) at ``/workspace``, user 1000 with no
    capabilities, no network (``host_network=True`` shares this host's), none
    of this process's environment (``env`` adds variables before the
    session's); everything in it is killed when the command ends or the call
    is cancelled. ``unconfined=True`` runs it on this host in ``ctx.cwd`` with
    this process's environment (or ``env``)."""
    if unconfined:
        return await _collect(await asyncio.create_subprocess_exec(
            *argv, cwd=ctx.cwd or None, env={**(env if env is not None else os.environ), **ctx.env},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True))
    check_sandbox(host_network=host_network, bwrap=bwrap)
    user = _host_user()
    if ctx.cwd and user:
        why = _give_to_nobody(ctx.cwd)
        if why:
            return ToolResult.text(why, is_error=True, error_code="workspace_unavailable")
    fds: list[int] = []
    try:
        ws = None
        if ctx.cwd:
            ws = os.open(ctx.cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            fds.append(ws)
        users = []
        for data in (_PASSWD, _GROUP):
            r, w = os.pipe()
            fds.append(r)
            os.write(w, data)  # far below a pipe's buffer
            os.close(w)
            users.append(r)
        info_r, info_w = os.pipe()
        fds.append(info_w)
        try:
            proc = await asyncio.create_subprocess_exec(
                bwrap, *_bwrap_args(host_network, ws, ctx.read_only, (users[0], users[1])), "--info-fd", str(info_w),
                "--", *argv, cwd="/", env=_sandbox_env(env, ctx.env), pass_fds=fds, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True, **user)
        except BaseException:
            os.close(info_r)
            raise
    finally:
        for fd in fds:
            os.close(fd)
    return await _collect(proc, asyncio.ensure_future(_sandbox_pidfd(info_r)))


async def _sandbox_pidfd(fd: int) -> int | None:
    """Reads bwrap's --info-fd report to its end and returns a pidfd of the
    sandbox's first process (its PID 1), or None when bwrap reported none.

    That process is bound to bwrap's life only once its setup is done: bwrap
    killed earlier leaves it running the command with the output pipe open,
    so a cancel kills it by this pidfd as well."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    try:
        data = b""
        while chunk := await reader.read(64 * 1024):  # to its end: bwrap closes it once written
            data = (data + chunk)[: 64 * 1024]
    finally:
        transport.close()
    try:
        return os.pidfd_open(int(json.loads(data)["child-pid"]))
    except (ValueError, KeyError, TypeError, OSError):
        return None


async def _collect(proc: asyncio.subprocess.Process, sandbox: asyncio.Future[int | None] | None = None) -> ToolResult:
    try:
        out, _ = await proc.communicate()
    except asyncio.CancelledError:
        await _kill(proc, sandbox)
        raise
    finally:
        if sandbox is not None:
            _close_pidfd(sandbox)
    text = _cap(out).decode("utf-8", "replace")
    if proc.returncode != 0:
        text += f"\n(exit {proc.returncode})"
    return ToolResult.text(text or "(no output)", is_error=proc.returncode != 0)


async def _kill(proc: asyncio.subprocess.Process, sandbox: asyncio.Future[int | None] | None) -> None:
    """Kills a cancelled command and everything in its sandbox, then waits for
    its exit: the sandbox's PID 1 first (its pidfd, waiting briefly for bwrap
    to report it), then the process group of bwrap or the unconfined command."""
    if sandbox is not None:
        try:
            pidfd = await asyncio.wait_for(asyncio.shield(sandbox), 5)
        except (asyncio.TimeoutError, OSError):
            pidfd = None
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    await proc.wait()


def _close_pidfd(sandbox: asyncio.Future[int | None]) -> None:
    """Closes the pidfd once known; a report still unread is dropped."""
    if not sandbox.done():
        sandbox.add_done_callback(_close_pidfd)
        return
    if not sandbox.cancelled() and sandbox.exception() is None and sandbox.result() is not None:
        os.close(sandbox.result())


def _cap(b: bytes) -> bytes:
    if len(b) <= _MAX_OUTPUT:
        return b
    half = _MAX_OUTPUT // 2
    return b[:half] + f"\n[output truncated: {len(b) - 2 * half} bytes omitted]\n".encode() + b[-half:]
