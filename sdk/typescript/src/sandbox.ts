// The sandbox the SDK's built-in tools run commands in: bubblewrap (bwrap)
// with new user, PID, IPC, UTS and network namespaces.

import { spawn, spawnSync, type StdioOptions } from 'node:child_process';
import { closeSync, constants, lchownSync, lstatSync, openSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { ToolContext, ToolResult } from './client.js';

/** How a command runs: in a sandbox (the default) or, explicitly, on this host. */
export interface SandboxOptions {
  /**
   * Run on this host, as this process's user, with its environment: the
   * command reads whatever this user reads (`/etc/shadow` as root, the
   * environment of this process in `/proc`) and reaches any address. Only
   * where model-written commands can do no harm (a throwaway container or VM).
   */
  unconfined?: boolean;
  /** Give the sandbox this host's network (default: none but a loopback of its own). */
  hostNetwork?: boolean;
  /** The bubblewrap program (default `bwrap`, looked up on the standard PATH). */
  bwrap?: string;
  /**
   * Variables the command gets (before the session's). Sandboxed, the
   * default is a minimal environment (PATH, HOME, USER, LANG); unconfined,
   * this process's environment.
   */
  env?: Record<string, string | undefined>;
}

/** Thrown when the sandbox cannot start on this host and the caller did not opt out. */
export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
}

/** Where the session's directory is inside the sandbox (the command's working directory). */
export const SANDBOX_WORKSPACE = '/workspace';

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const UID = 1000; // the user commands run as inside
const NOBODY = 65534; // the host user a root executor runs sandboxes as
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
// The parts of the host's /etc that programs need: not shadow, not the host's keys.
const ETC = [
  'alternatives', 'bash.bashrc', 'ca-certificates', 'ca-certificates.conf', 'debian_version', 'fonts', 'gai.conf',
  'host.conf', 'inputrc', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'locale.alias', 'localtime', 'magic',
  'magic.mime', 'mime.types', 'nsswitch.conf', 'os-release', 'perl', 'profile', 'protocols', 'python3', 'rpc',
  'services', 'ssl/certs', 'ssl/openssl.cnf', 'terminfo', 'timezone', 'xdg',
];
const HOST_NETWORK_ETC = ['resolv.conf', 'hosts'];
const PASSWD = `root:x:0:0:root:/root:/usr/sbin/nologin\nuser:x:${UID}:${UID}:user:${SANDBOX_WORKSPACE}:/bin/bash\n`;
const GROUP = `root:x:0:\nuser:x:${UID}:\n`;
// Child descriptors: the session's directory, /etc/passwd and /etc/group.
const FD_WORKSPACE = 3;
const FD_PASSWD = 4;
const FD_GROUP = 5;
const FD_INFO = 6; // bwrap's --info-fd: it reports the sandbox's first process there

/** Output kept per result: the head and the tail, with a marker between. */
const MAX_OUTPUT = 100 * 1024;

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/** The bwrap arguments of a sandbox; `workspace` says whether FD_WORKSPACE holds the session's directory. */
function bwrapArgs(o: SandboxOptions, workspace: boolean, readOnly: boolean, users: boolean): string[] {
  const a = ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--disable-userns',
    '--uid', String(UID), '--gid', String(UID), '--hostname', 'reins', '--die-with-parent', '--new-session'];
  if (!o.hostNetwork) a.push('--unshare-net');
  for (const d of SYSTEM_DIRS) {
    if (!exists(d)) continue;
    if (lstatSync(d).isSymbolicLink()) a.push('--symlink', readlinkSync(d), d);
    else a.push('--ro-bind', d, d);
  }
  for (const e of o.hostNetwork ? [...ETC, ...HOST_NETWORK_ETC] : ETC) {
    const p = path.join('/etc', e);
    if (exists(p)) a.push('--ro-bind', p, p);
  }
  if (users) a.push('--ro-bind-data', String(FD_PASSWD), '/etc/passwd', '--ro-bind-data', String(FD_GROUP), '/etc/group');
  a.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp');
  if (workspace) a.push(readOnly ? '--ro-bind-fd' : '--bind-fd', String(FD_WORKSPACE), SANDBOX_WORKSPACE);
  else a.push('--dir', SANDBOX_WORKSPACE);
  a.push('--chdir', SANDBOX_WORKSPACE);
  return a;
}

/** The environment bwrap starts with; the sandbox's processes (its pid 1 too) see exactly this. */
function sandboxEnv(o: SandboxOptions, session: Record<string, string>): Record<string, string | undefined> {
  return { PATH, HOME: SANDBOX_WORKSPACE, USER: 'user', LOGNAME: 'user', LANG: 'C.UTF-8', ...o.env, ...session };
}

/** A root executor runs its sandboxes as nobody, like reins's own sandboxes. */
function hostUser(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: NOBODY, gid: NOBODY } : {};
}

const checked = new Map<string, string>(); // bwrap|network → "" or why it failed

/**
 * Starts a sandbox (once per bwrap program and network setting) and throws
 * {@link SandboxUnavailableError}, saying why and how to opt out, when it
 * cannot start: bwrap missing, or user namespaces disabled.
 */
export function checkSandbox(options: SandboxOptions = {}): void {
  if (options.unconfined) return;
  const bwrap = options.bwrap ?? 'bwrap';
  const key = `${bwrap}|${!!options.hostNetwork}`;
  let why = checked.get(key);
  if (why === undefined) {
    const r = spawnSync(bwrap, [...bwrapArgs(options, false, false, false), '--', 'true'], {
      env: sandboxEnv(options, {}), cwd: '/', stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000, ...hostUser(),
    });
    why = r.error ? r.error.message : r.status === 0 ? '' : `${bwrap} exited ${r.status ?? r.signal}: ${r.stderr.toString().trim()}`;
    checked.set(key, why);
  }
  if (why !== '') {
    throw new SandboxUnavailableError(
      `the sandbox of the built-in tools cannot start: ${why}. Install bubblewrap (apt-get install bubblewrap) on a kernel ` +
        'with unprivileged user namespaces, or pass { unconfined: true } to run commands on this host without a sandbox ' +
        '(only where model-written commands can do no harm)',
    );
  }
}

/**
 * Readies the session's directory for a sandbox that a root executor runs
 * as nobody: nobody must be able to reach it (bwrap resolves it by its
 * path), and it and what is in it become nobody's. It returns why the
 * sandbox cannot use it, or "".
 */
function giveToNobody(dir: string): string {
  const real = realpathSync(dir);
  for (let p = path.dirname(real); ; p = path.dirname(p)) {
    const st = statSync(p);
    const x = st.uid === NOBODY ? st.mode & 0o100 : st.gid === NOBODY ? st.mode & 0o010 : st.mode & 0o001;
    if (!x) {
      return `the sandbox cannot reach the session's directory: this executor runs as root, so its sandboxes run as ` +
        `nobody (uid ${NOBODY}), who cannot enter ${p}. Put the workspace where nobody can reach it (every directory ` +
        'above it searchable by others, e.g. under /srv), or run the executor as an unprivileged user';
    }
    if (p === '/') break;
  }
  if (lstatSync(real).uid !== NOBODY) chownTree(real, NOBODY, NOBODY);
  return '';
}

/** Gives dir and what is in it to uid:gid, without following symbolic links. */
function chownTree(dir: string, uid: number, gid: number): void {
  lchownSync(dir, uid, gid);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else lchownSync(p, uid, gid);
  }
}

/**
 * Runs `argv` for a tool call and returns its output (stdout and stderr,
 * 100 KiB at most) as the result, an error result when it exits non-zero.
 * By default it runs in a bubblewrap sandbox of its own: new user, PID,
 * IPC, UTS and network namespaces, the host's `/usr` read-only, a few
 * files of `/etc` (no `/etc/shadow`), a fresh `/proc` that shows only the
 * sandbox's processes, a private `/tmp`, the session's directory writable
 * (read-only for a read-only session) at `/workspace`, user 1000 with no
 * capabilities, no network, none of this process's environment; everything
 * in it is killed when the command ends or the call is canceled. With
 * `unconfined` it runs on this host in `ctx.cwd`.
 */
export function runCommand(argv: string[], ctx: ToolContext, options: SandboxOptions = {}): Promise<ToolResult> {
  if (options.unconfined) {
    return collect(ctx, () => spawn(argv[0], argv.slice(1), {
      cwd: ctx.cwd || undefined, env: { ...(options.env ?? process.env), ...ctx.env },
      stdio: ['ignore', 'pipe', 'pipe'], detached: true,
    }));
  }
  checkSandbox(options);
  const user = hostUser();
  let fd = -1;
  if (ctx.cwd) {
    const why = user.uid !== undefined && giveToNobody(ctx.cwd);
    if (why) return Promise.resolve({ content: [{ type: 'text', text: why }], is_error: true, error_code: 'workspace_unavailable' });
    fd = openSync(ctx.cwd, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  }
  try {
    const stdio: StdioOptions = ['ignore', 'pipe', 'pipe', fd >= 0 ? fd : 'ignore', 'pipe', 'pipe', 'pipe'];
    return collect(ctx, () => {
      const args = [...bwrapArgs(options, fd >= 0, ctx.readOnly, true), '--info-fd', String(FD_INFO), '--', ...argv];
      const child = spawn(options.bwrap ?? 'bwrap', args, {
        env: sandboxEnv(options, ctx.env), cwd: '/', stdio, detached: true, ...user,
      });
      const pipes = child.stdio as unknown as Writable[];
      pipes[FD_PASSWD].end(PASSWD);
      pipes[FD_GROUP].end(GROUP);
      return child;
    });
  } finally {
    if (fd >= 0) closeSync(fd);
  }
}

/** Runs the child start makes and turns its output and exit into a result. */
function collect(ctx: ToolContext, start: () => ReturnType<typeof spawn>): Promise<ToolResult> {
  return new Promise((resolve) => {
    const child = start();
    const chunks: Buffer[] = [];
    let size = 0;
    let omitted = 0;
    let tail = Buffer.alloc(0);
    const keep = (b: Buffer) => {
      if (size + b.length <= MAX_OUTPUT) {
        chunks.push(b);
        size += b.length;
      } else {
        omitted += b.length; // the head is kept; the tail is kept here
        tail = Buffer.concat([tail, b]).subarray(-MAX_OUTPUT / 2);
      }
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    // A child killed mid-call (a cancel, a lost connection) may reset its
    // ends of the stdio sockets, bwrap's passwd and group pipes with data
    // still unread among them: the result comes from 'close', and a reset
    // stream must not take the executor down as an unhandled 'error'.
    for (const s of child.stdio) s?.on('error', () => {});
    // bwrap's first sandbox process dies with bwrap only once its setup is
    // done: bwrap killed earlier leaves it running the command with the
    // output open, so a cancel kills it by the pid bwrap reports (at once,
    // right after creating it; bwrap holds it unreaped until bwrap exits).
    const sandbox = sandboxPid((child.stdio as unknown as (Readable | null | undefined)[])[FD_INFO]);
    let closed = false;
    const kill = () => {
      const late = new Promise<undefined>((r) => {
        const t = setTimeout(r, 5_000);
        void sandbox.then(() => clearTimeout(t));
      });
      void Promise.race([sandbox, late]).then((pid) => {
        for (const target of closed ? [] : [pid, -child.pid!]) {
          if (target === undefined) continue;
          try {
            process.kill(target, 'SIGKILL');
          } catch {
            /* gone already */
          }
        }
      });
    };
    ctx.signal.addEventListener('abort', kill, { once: true });
    child.on('error', (err) => {
      ctx.signal.removeEventListener('abort', kill);
      resolve({ content: [{ type: 'text', text: `${child.spawnfile} could not start: ${err.message}` }], is_error: true });
    });
    child.on('close', (code, signal) => {
      closed = true;
      ctx.signal.removeEventListener('abort', kill);
      let text = Buffer.concat(chunks).toString('utf8');
      if (omitted > 0) {
        text += `\n[output truncated: ${Math.max(0, omitted - tail.length)} bytes omitted]\n` + tail.toString('utf8');
      }
      const failed = code !== 0;
      if (failed) text += `\n(exit ${code ?? signal})`;
      resolve({ content: [{ type: 'text', text: text || '(no output)' }], is_error: failed });
    });
  });
}

/** The pid of the sandbox's first process, read from bwrap's --info-fd report (none for an unconfined command). */
function sandboxPid(info: Readable | null | undefined): Promise<number | undefined> {
  if (!info) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    let data = '';
    info.setEncoding('utf8');
    info.on('data', (s: string) => {
      if (data.length < 64 * 1024) data += s;
    });
    info.on('error', () => resolve(undefined));
    info.on('close', () => {
      try {
        const pid: unknown = JSON.parse(data)['child-pid'];
        resolve(typeof pid === 'number' && Number.isInteger(pid) && pid > 0 ? pid : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}
