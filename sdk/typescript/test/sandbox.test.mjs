// The built-in bash tool runs in a bubblewrap sandbox unless told not to.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { SandboxUnavailableError, bashTool, runCommand } from '../dist/index.js';

// A session directory a root executor's sandbox (nobody) can reach.
const root = mkdtempSync(path.join(os.tmpdir(), 'reins-ts-sandbox-'));
chmodSync(root, 0o711);
after(() => rmSync(root, { recursive: true, force: true }));

let n = 0;
function context(extra = {}) {
  const cwd = path.join(root, `s${++n}`);
  mkdirSync(cwd, { mode: 0o700 });
  return { sessionId: `s${n}`, toolCallId: 'c', signal: new AbortController().signal, env: {}, cwd, readOnly: false, ...extra };
}

const text = (r) => r.content.map((c) => c.text).join('');

test('bash runs sandboxed by default: no /etc/shadow, no host /proc, none of this process, its own user', async () => {
  process.env.REINS_TS_TEST_SECRET = 'ts-sandbox-secret-1';
  const ctx = context({ env: { SESSION_VAR: 'given' } });
  const r = await bashTool()(
    { command: `id -u; cat /etc/shadow; cat /proc/${process.pid}/environ; cat /proc/1/environ; env; pwd; echo made > out.txt` },
    ctx,
  );
  const out = text(r);
  assert.doesNotMatch(out, /root:/, out);
  assert.doesNotMatch(out, /ts-sandbox-secret-1/, out);
  assert.equal(out.split('\n')[0], '1000', out);
  assert.match(out, /No such file or directory/, out);
  assert.match(out, /SESSION_VAR=given/, out);
  assert.match(out, /^\/workspace$/m, out);
  assert.equal(readFileSync(path.join(ctx.cwd, 'out.txt'), 'utf8'), 'made\n');
});

test('the sandbox has no network: the host loopback is out of reach', async () => {
  const srv = createServer((c) => c.end('host-listener\n'));
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  try {
    const { port } = srv.address();
    const r = await bashTool()({ command: `(exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3) 2>&1 || echo refused` }, context());
    assert.doesNotMatch(text(r), /host-listener/);
    assert.match(text(r), /refused/);
  } finally {
    srv.close();
  }
});

test('a read-only session cannot write its directory', async () => {
  const r = await bashTool()({ command: 'echo x > f.txt' }, context({ readOnly: true }));
  assert.equal(r.is_error, true);
  assert.match(text(r), /Read-only file system/);
});

test('canceling a call kills everything in its sandbox', { timeout: 20_000 }, async () => {
  const tag = `${Math.floor(Math.random() * 1e6) + 1e6}`;
  const ac = new AbortController();
  const started = Date.now();
  const call = bashTool()({ command: `(setsid sleep ${tag} &); sleep ${tag}` }, context({ signal: ac.signal }));
  await new Promise((r) => setTimeout(r, 500));
  ac.abort();
  await call;
  assert.ok(Date.now() - started < 10_000);
  await new Promise((r) => setTimeout(r, 300));
  const ps = execFileSync('ps', ['-eo', 'args']).toString();
  assert.doesNotMatch(ps, new RegExp(`sleep ${tag}`), 'a process of the canceled sandbox survived');
});

// A stand-in for bwrap that leaves its sandbox unbound (see the file).
const UNBOUND_BWRAP = new URL('../../testdata/unbound-bwrap.py', import.meta.url);

test('canceling kills a sandbox bwrap has not bound to its life yet', { timeout: 20_000 }, async (t) => {
  // bwrap sets PR_SET_PDEATHSIG in its first sandbox process last: a cancel
  // that killed only bwrap before then left the command running with the
  // output open, and the call hung until the command ended.
  const fake = path.join(root, 'bwrap'); // where a root test's nobody can run it
  copyFileSync(UNBOUND_BWRAP, fake);
  chmodSync(fake, 0o755);
  const tag = `${Math.floor(Math.random() * 1e6) + 1e6}`;
  t.after(() => spawnSync('pkill', ['-KILL', '-f', `sleep ${tag}`]));
  const ac = new AbortController();
  const call = bashTool({ bwrap: fake })({ command: `sleep ${tag}` }, context({ signal: ac.signal }));
  await new Promise((r) => setTimeout(r, 500));
  ac.abort();
  const late = new Promise((r) => setTimeout(() => r('still running'), 10_000).unref());
  assert.notEqual(await Promise.race([call, late]), 'still running', 'the cancel waits for a command bwrap had not bound');
  const ps = execFileSync('ps', ['-eo', 'args']).toString();
  assert.doesNotMatch(ps, new RegExp(`sleep ${tag}`), 'the sandbox\'s command survived the cancel');
});

test('runCommand runs a handler\'s own command in the same sandbox', async () => {
  const ctx = context();
  await bashTool()({ command: 'printf "one\\ntwo\\n" > notes.txt' }, ctx);
  const r = await runCommand(['cat', '-n', '--', 'notes.txt'], ctx);
  assert.match(text(r), /1\tone\n\s+2\ttwo/);
  const escape = await runCommand(['cat', '--', '/etc/shadow'], ctx);
  assert.equal(escape.is_error, true);
});

test('without a usable sandbox bashTool refuses at once and names the opt-out', () => {
  assert.throws(
    () => bashTool({ bwrap: '/nonexistent/bwrap' }),
    (e) => e instanceof SandboxUnavailableError && /unconfined: true/.test(e.message) && /bubblewrap/.test(e.message),
  );
});

test('unconfined: true runs on this host, as this user, and says so by opting out', async () => {
  const r = await bashTool({ unconfined: true })({ command: 'id -u' }, context());
  assert.equal(text(r).trim(), String(process.getuid()));
});
