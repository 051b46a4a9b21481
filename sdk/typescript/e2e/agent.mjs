// The agent end the reins e2e tests drive (internal/e2e/sdkagentend_test.go):
// each turn answers the user's message, replays its first batch (refused
// with -32013), refreshes its tokens, runs bash through the platform tools
// endpoint, reports the output and ends the turn; a turn whose message is
// "wait" waits for its cancellation. It prints one JSON line per event.
import { ExecutorClient } from '../dist/index.js';

const [url, token, name] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const message = (text) => ({ type: 'agent.message', content: [{ type: 'text', text }] });
const said = (turn) => turn.start.inputs.find((e) => e.type === 'user.message')?.content?.[0]?.text ?? '';
const text = (blocks) => blocks.map((b) => b.text ?? '').join('');

async function runTurn(turn) {
  const words = said(turn);
  out({ event: 'turn', text: words, transcript: turn.start.transcript?.length ?? 0 });
  if (words === 'wait') {
    // turn.cancel may overtake the answer to this send: check before waiting.
    await turn.send(message('waiting')).catch(() => {});
    if (!turn.signal.aborted) await new Promise((r) => turn.signal.addEventListener('abort', r, { once: true }));
    out({ event: 'turn_canceled', reason: turn.signal.reason?.reason });
    return;
  }
  await turn.send(message(`You said: ${words}`));
  // The same batch again (an agent end that lost the answer): refused.
  try {
    await client.call('session.event', { session_id: turn.sessionId, turn_id: turn.turnId, sequence: 0, events: [message('replayed')] });
    out({ event: 'replay_accepted' });
  } catch (e) {
    out({ event: 'replay_refused', code: e.code, expected_sequence: e.data?.expected_sequence });
  }
  const grant = await turn.refreshToolsToken();
  out({ event: 'tools_token', ok: grant.token.startsWith('rtt_') });
  try {
    await turn.refreshModelToken();
  } catch (e) {
    out({ event: 'model_token_refused', error: e.name, reason: e.reason });
  }
  const res = await turn.callTool({ name: 'bash', input: { command: `echo ${words}` } });
  out({ event: 'tool_result', text: text(res.content), error_code: res.error_code ?? '' });
  await turn.send(message(`bash said: ${text(res.content).trim()}`));
  await turn.endTurn();
  try {
    await turn.send(message('late'));
  } catch (e) {
    out({ event: 'late_send', error: e.name, reason: e.reason });
  }
}

const client = new ExecutorClient({
  url,
  machineToken: token,
  executor: { name },
  backoffMinMs: 50,
  backoffMaxMs: 300,
  agent: (turn) =>
    runTurn(turn).catch((e) => {
      out({ event: 'turn_failed', error: e.name, message: e.message });
    }),
  onEvent: (e) => out({ event: e.type }),
  log: (m) => process.stderr.write(m + '\n'),
});
process.on('SIGTERM', () => client.stop());
client.run().catch((e) => {
  out({ ended: e.name, message: e.message });
  process.exit(0);
});
