// The page's stream client (web/js/api.js streamTurn) against the real
// server, with the network cut mid-turn: it must reconnect to
// GET /api/sessions/:id/stream with Last-Event-ID and end with exactly the
// frames an uncut turn delivers, none twice and none missing. The cut is made
// in a fetch wrapper, in the middle of a frame, the way a dropped TCP
// connection looks to fetch.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { getSession, parseEventId, resumeTurn, streamTurn } from '../../web/js/api.js';
import { applyChunk, newTurn, textOf } from '../../web/js/state.js';
import { startServer } from '../lib/server.js';

let fast; // the turn is over before the client reconnects: pure replay
let slow; // the turn is still running: replay, then live
before(async () => {
  [fast, slow] = await Promise.all([startServer(), startServer({ env: { OFFLINE_MODEL_DELAY_MS: '15' } })]);
});
after(async () => { await Promise.all([fast?.stop(), slow?.stop()]); });

// cutting returns a fetch that delivers the first POST's body only up to the
// middle of frame n+1 and then fails the read with a network error.
function cutting(n) {
  const log = { resumes: [] };
  const impl = async (url, init = {}) => {
    const res = await fetch(url, init);
    if (init.method !== 'POST') {
      log.resumes.push({ status: res.status, lastEventId: new Headers(init.headers).get('last-event-id') });
      return res;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let all = '';
    let sent = 0;
    const body = new ReadableStream({
      async pull(c) {
        const { value, done } = await reader.read();
        if (done) return c.close();
        all += decoder.decode(value, { stream: true });
        let end = -2;
        for (let k = 0; k < n && end !== -1; k++) end = all.indexOf('\n\n', end + 2);
        if (end < 0) {
          c.enqueue(encoder.encode(all.slice(sent)));
          sent = all.length;
          return;
        }
        // Deliver a few bytes of the next frame, then fail like a dropped connection.
        c.enqueue(encoder.encode(all.slice(sent, Math.min(all.length, end + 2 + 8))));
        reader.cancel().catch(() => {});
        c.error(new TypeError('network error (cut by the test)'));
      },
      cancel() { return reader.cancel(); },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { impl, log };
}

async function run(server, message, fetchImpl) {
  const turn = newTurn();
  const ids = [];
  const types = [];
  const result = await streamTurn({
    base: server.base,
    agentId: 'cognitive-reasoner',
    message,
    fetchImpl,
    delay: () => 20,
    maxAttempts: 5,
    signal: AbortSignal.timeout(30000),
    onChunk(chunk, id) {
      ids.push(id);
      types.push(chunk.type);
      applyChunk(turn, chunk);
    },
  });
  return { turn, ids, types, result };
}

// assertContiguous checks that frame ids are <turn>:1..n in order.
function assertContiguous(ids, turnId) {
  ids.forEach((id, i) => {
    const { turn, seq } = parseEventId(id);
    assert.equal(turn, turnId, `frame ${i} belongs to another turn: ${id}`);
    assert.equal(seq, i + 1, `frame ${i} has id ${id}: a gap or a duplicate`);
  });
}

test('a turn cut mid-stream after it finished is replayed without gap or duplicate', async () => {
  const message = 'Critique the argument that remote work improves productivity';
  const whole = await run(fast, message, fetch);
  assert.equal(whole.result.ended, 'done');
  assertContiguous(whole.ids, whole.result.turnId);

  const { impl, log } = cutting(6);
  const cut = await run(fast, message, impl);
  assert.equal(cut.result.ended, 'done', 'the resumed stream did not reach [DONE]');
  assert.ok(log.resumes.length >= 1, 'the client never reconnected');
  assert.equal(log.resumes[0].lastEventId, `${cut.result.turnId}:6`, 'Last-Event-ID is not the last frame seen');
  assert.equal(log.resumes[0].status, 200);
  assertContiguous(cut.ids, cut.result.turnId);
  // The offline model is deterministic: the cut turn carries the same chunks.
  assert.deepEqual(cut.types, whole.types);
  assert.equal(textOf(cut.turn), textOf(whole.turn));
  assert.deepEqual(
    cut.turn.parts.filter((p) => p.kind === 'tool').map((p) => [p.toolName, p.state]),
    [['critique', 'output-available'], ['debate', 'output-available'], ['reflect', 'output-available']],
  );
  assert.ok(cut.turn.finished);
});

test('a turn cut while still running is resumed live', async () => {
  const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
  const { impl, log } = cutting(4);
  const cut = await run(slow, `[offline:echo] ${words}`, impl);
  assert.equal(cut.result.ended, 'done');
  assert.ok(log.resumes.length >= 1, 'the client never reconnected');
  assertContiguous(cut.ids, cut.result.turnId);
  assert.equal(textOf(cut.turn), words, 'the resumed answer differs from the echoed text');
});

test('resuming a finished turn from its last frame gets 204', async () => {
  const whole = await run(fast, '[offline:echo] done already', fetch);
  const res = await fetch(`${fast.base}/api/sessions/${whole.result.sessionId}/stream`, {
    headers: { 'last-event-id': whole.result.lastEventId },
  });
  assert.equal(res.status, 204);
});

test('a page that reloads mid-turn follows the running turn from its start', async () => {
  const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
  // The first page: reads a few frames, then goes away (a reload aborts its fetch).
  const gone = new AbortController();
  let seen = 0;
  let lastSession = null;
  const first = streamTurn({
    base: slow.base, agentId: 'cognitive-reasoner', message: `[offline:echo] ${words}`, signal: gone.signal,
    onSession(id) { lastSession = id; },
    onChunk() { if (++seen === 3) gone.abort(new Error('page reloaded')); },
  });
  await assert.rejects(first);

  // The reloaded page: finds the session's running turn and follows it.
  const sid = lastSession ?? assert.fail('no session id from the first request');
  const view = await getSession(sid, { base: slow.base });
  assert.equal(view.turn?.running, true, 'the turn is not running any more; the test is too slow to show a live resume');
  const turn = newTurn();
  const ids = [];
  const result = await resumeTurn({
    base: slow.base, sessionId: sid, lastEventId: `${view.turn.id}:0`, delay: () => 20, signal: AbortSignal.timeout(30000),
    onChunk(chunk, id) { ids.push(id); applyChunk(turn, chunk); },
  });
  assert.equal(result.ended, 'done');
  assertContiguous(ids, view.turn.id);
  assert.equal(textOf(turn), words);
  assert.equal(await getSession('0123456789abcdef0123456789abcdef', { base: slow.base }), null, 'an unknown session is not null');
});
