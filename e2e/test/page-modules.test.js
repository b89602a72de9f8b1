// Unit tests of the page's DOM-free modules (web/js/api.js and state.js),
// run under node: the SSE framing, the chunk reducer, the agent list mapping
// and the session store. The browser test covers the same code end to end;
// these pin the edge cases a live server rarely produces.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelay, chatBody, normalizeAgent, parseEventId, parseSSE } from '../../web/js/api.js';
import { Sessions, applyChunk, historyEntries, newTurn, snapshotOf, textOf } from '../../web/js/state.js';

// bodyOf returns a byte stream delivering the given string pieces one by one,
// so frames and even lines and UTF-8 sequences split across reads.
function bodyOf(pieces) {
  const enc = new TextEncoder();
  const bytes = pieces.map((p) => (typeof p === 'string' ? enc.encode(p) : p));
  return new ReadableStream({
    pull(c) {
      if (bytes.length) c.enqueue(bytes.shift());
      else c.close();
    },
  });
}

async function collect(pieces) {
  const out = [];
  for await (const f of parseSSE(bodyOf(pieces))) out.push(f);
  return out;
}

test('parseSSE frames events as the SSE spec says', async (t) => {
  const euro = new TextEncoder().encode('data: €\n\n');
  const cases = [
    { name: 'one frame', in: ['id: t:1\ndata: {"a":1}\n\n'], want: [{ id: 't:1', data: '{"a":1}' }] },
    { name: 'CRLF line ends', in: ['id: t:1\r\ndata: x\r\n\r\n'], want: [{ id: 't:1', data: 'x' }] },
    { name: 'CR line ends', in: ['id: t:1\rdata: x\r\r'], want: [{ id: 't:1', data: 'x' }] },
    { name: 'CRLF split between reads', in: ['data: x\r', '\n\r', '\n'], want: [{ id: null, data: 'x' }] },
    { name: 'frame split mid-line', in: ['id: t:', '7\nda', 'ta: [DO', 'NE]\n', '\n'], want: [{ id: 't:7', data: '[DONE]' }] },
    { name: 'multi-line data joins with LF', in: ['data: a\ndata: b\n\n'], want: [{ id: null, data: 'a\nb' }] },
    { name: 'no space after colon', in: ['id:t:2\ndata:x\n\n'], want: [{ id: 't:2', data: 'x' }] },
    { name: 'comments and unknown fields skipped', in: [': ping\nevent: message\nretry: 10\ndata: x\n\n'], want: [{ id: null, data: 'x' }] },
    { name: 'id persists to later frames', in: ['id: t:1\ndata: a\n\ndata: b\n\n'], want: [{ id: 't:1', data: 'a' }, { id: 't:1', data: 'b' }] },
    { name: 'empty frame dispatches nothing', in: ['id: t:3\n\ndata: a\n\n'], want: [{ id: 't:3', data: 'a' }] },
    { name: 'unterminated last frame dropped', in: ['data: a\n\ndata: b'], want: [{ id: null, data: 'a' }] },
    { name: 'UTF-8 split across reads', in: [euro.slice(0, 7), euro.slice(7)], want: [{ id: null, data: '€' }] },
    { name: 'id with NUL ignored', in: ['id: t:1\ndata: a\n\nid: x\0y\ndata: b\n\n'], want: [{ id: 't:1', data: 'a' }, { id: 't:1', data: 'b' }] },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => assert.deepEqual(await collect(c.in), c.want));
  }
});

test('parseSSE cancels the body when the reader stops early', async () => {
  let cancelled = false;
  const body = new ReadableStream({
    pull(c) { c.enqueue(new TextEncoder().encode('data: x\n\n')); },
    cancel() { cancelled = true; },
  });
  for await (const f of parseSSE(body)) {
    assert.equal(f.data, 'x');
    break;
  }
  assert.ok(cancelled, 'the body was not cancelled');
});

test('parseEventId splits turn and sequence', () => {
  assert.deepEqual(parseEventId('abc:12'), { turn: 'abc', seq: 12 });
  assert.deepEqual(parseEventId('a:b:3'), { turn: 'a:b', seq: 3 });
  assert.deepEqual(parseEventId('abc'), { turn: 'abc', seq: -1 });
  assert.deepEqual(parseEventId('abc:x'), { turn: 'abc', seq: -1 });
  assert.deepEqual(parseEventId(null), { turn: '', seq: -1 });
});

test('backoffDelay grows and is capped', () => {
  for (let n = 0; n < 12; n++) {
    const d = backoffDelay(n);
    const base = Math.min(8000, 250 * 2 ** n);
    assert.ok(d >= base / 2 && d <= base, `attempt ${n}: ${d} outside [${base / 2}, ${base}]`);
  }
});

test('chatBody sends the message as an AI SDK UIMessage', () => {
  const b = chatBody('hello', 'sid');
  assert.equal(b.message, 'hello');
  assert.equal(b.sessionId, 'sid');
  assert.equal(b.messages.length, 1);
  assert.equal(b.messages[0].role, 'user');
  assert.deepEqual(b.messages[0].parts, [{ type: 'text', text: 'hello' }]);
  assert.equal('sessionId' in chatBody('x', ''), false);
});

test('normalizeAgent accepts the flat and the template shapes', () => {
  const flat = normalizeAgent({ id: 'a', name: 'A', chatPrompts: ['p'], provider: 'offline', model: 'm' });
  assert.equal(flat.offline, true);
  assert.equal(normalizeAgent({ id: 'x', offline: true, model: { provider: 'p' } }).offline, true);
  assert.equal(normalizeAgent({ id: 'x', model: { provider: 'openai' } }).offline, false);
  assert.deepEqual([flat.id, flat.name, flat.chatPrompts, flat.provider, flat.model], ['a', 'A', ['p'], 'offline', 'm']);
  const nested = normalizeAgent({ agentId: 'b', chatSettings: { chatPrompts: ['q'], initialMessages: 'hi' }, model: { provider: 'anthropic', name: 'claude' } });
  assert.deepEqual([nested.id, nested.name, nested.chatPrompts, nested.initialMessages, nested.provider, nested.model], ['b', 'b', ['q'], ['hi'], 'anthropic', 'claude']);
  assert.deepEqual(normalizeAgent({ id: 'c' }).chatPrompts, []);
});

test('applyChunk assembles a turn with text, tools, steps, usage and errors', () => {
  const turn = newTurn();
  const chunks = [
    { type: 'start', messageId: 'T' },
    { type: 'data-orchestration', data: { activeStep: '', sequenceIndex: 0, sequence: [], offeredTools: ['critique', 'think'] } },
    { type: 'start-step' },
    { type: 'text-start', id: 'x1' },
    { type: 'text-delta', id: 'x1', delta: 'Let me ' },
    { type: 'text-delta', id: 'x1', delta: 'critique.' },
    { type: 'text-end', id: 'x1' },
    { type: 'tool-input-start', toolCallId: 'c1', toolName: 'critique' },
    { type: 'tool-input-available', toolCallId: 'c1', toolName: 'critique', input: { subject: 's' } },
    { type: 'tool-output-available', toolCallId: 'c1', output: { content: '## Critique', type: 'critique_result' } },
    { type: 'data-orchestration', data: { activeStep: 'EvaluationMode', sequenceIndex: 1, sequence: ['critique', 'debate'], offeredTools: ['debate'], previousStep: '', transition: true } },
    { type: 'finish-step' },
    { type: 'data-usage', data: { prompt: 10, completion: 5, total: 15, final: false, session: { prompt: 10, completion: 5, total: 15 } } },
    { type: 'tool-input-start', toolCallId: 'c2', toolName: 'debate' },
    { type: 'tool-output-error', toolCallId: 'c2', errorText: 'tool failed' },
    { type: 'data-warning', data: { message: 'careful' } },
    { type: 'data-usage', data: { prompt: 7, completion: 3, total: 10, final: false } },
    { type: 'data-usage', data: { prompt: 17, completion: 8, total: 25, final: true, session: { prompt: 17, completion: 8, total: 25 } } },
    { type: 'data-usage', data: { prompt: 1, completion: 1, total: 2, final: false } },
    { type: 'error', errorText: 'model_error: the model failed' },
    { type: 'some-future-chunk', x: 1 },
    { type: 'finish' },
  ];
  const orch = [];
  for (const c of chunks) if (applyChunk(turn, c).orchestration) orch.push(turn.orchestration.activeStep);
  assert.equal(turn.messageId, 'T');
  assert.deepEqual(orch, ['', 'EvaluationMode']);
  assert.deepEqual(turn.parts.map((p) => p.kind), ['text', 'tool', 'step', 'tool', 'warning', 'error']);
  assert.equal(textOf(turn), 'Let me critique.');
  assert.ok(turn.parts[0].done);
  const [critique, debate] = turn.parts.filter((p) => p.kind === 'tool');
  assert.deepEqual([critique.toolName, critique.state, critique.input, critique.output.content], ['critique', 'output-available', { subject: 's' }, '## Critique']);
  assert.deepEqual([debate.toolName, debate.state, debate.errorText], ['debate', 'output-error', 'tool failed']);
  assert.deepEqual(turn.orchestration, { activeStep: 'EvaluationMode', sequenceIndex: 1, sequence: ['critique', 'debate'], offeredTools: ['debate'], previousStep: '', transition: true });
  // The final usage replaces the running sum and later per-call events do not change it.
  assert.deepEqual(turn.usage, { prompt: 17, completion: 8, total: 25, final: true });
  assert.deepEqual(turn.sessionUsage, { prompt: 17, completion: 8, total: 25 });
  assert.equal(turn.parts[5].message, 'model_error: the model failed');
  assert.ok(turn.finished);
});

test('applyChunk sums per-call usage until the final total', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'data-usage', data: { prompt: 3, completion: 2, final: false } });
  applyChunk(turn, { type: 'data-usage', data: { prompt: 4, completion: 1, total: 5, final: false } });
  assert.deepEqual(turn.usage, { prompt: 7, completion: 3, total: 10, final: false });
});

test('applyChunk ignores malformed chunks', () => {
  const turn = newTurn();
  for (const c of [null, 1, 'x', {}, { type: 7 }, { type: 'text-end', id: 'nope' }]) applyChunk(turn, c);
  assert.deepEqual(turn.parts, []);
  // A delta without its start still shows.
  applyChunk(turn, { type: 'text-delta', id: 'z', delta: 'hi' });
  assert.equal(textOf(turn), 'hi');
});

test('Sessions keeps one session per agent and survives disabled storage', () => {
  const map = new Map();
  const storage = { getItem: (k) => map.get(k) ?? null, setItem: (k, v) => map.set(k, v), removeItem: (k) => map.delete(k) };
  const s = new Sessions(storage);
  s.set('a', 'sid-a');
  s.set('b', 'sid-b');
  assert.equal(new Sessions(storage).get('a'), 'sid-a');
  assert.equal(s.get('b'), 'sid-b');
  s.set('a', '');
  assert.equal(new Sessions(storage).get('a'), '');

  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); }, removeItem() { throw new Error('denied'); } };
  const m = new Sessions(broken);
  m.set('a', 'sid');
  assert.equal(m.get('a'), 'sid');
});

test('historyEntries rebuilds turns from a stored history', () => {
  const history = [
    { role: 'system', content: 'not shown' },
    { role: 'user', content: 'Critique X' },
    { role: 'assistant', content: 'Starting.', toolCalls: [{ id: 'call_1', name: 'critique', arguments: { subject: 'X' } }] },
    { role: 'tool', toolCallId: 'call_1', toolName: 'critique', content: '## Critique' },
    { role: 'assistant', toolCalls: [{ id: 'call_2', name: 'debate', arguments: {} }] },
    { role: 'tool', toolCallId: 'call_2', toolName: 'debate', content: 'refused', isError: true },
    { role: 'assistant', content: 'Final.' },
    { role: 'user', content: 'Again' },
    { role: 'assistant', content: 'partial, still streaming' },
    null,
  ];
  const entries = historyEntries(history);
  assert.deepEqual(entries.map((e) => ('user' in e ? `user:${e.user}` : 'turn')), ['user:Critique X', 'turn', 'user:Again', 'turn']);
  const t = entries[1].turn;
  assert.ok(t.finished);
  assert.deepEqual(t.parts.map((p) => p.kind), ['text', 'tool', 'tool', 'text']);
  assert.equal(textOf(t), 'Starting.\n\nFinal.');
  assert.deepEqual([t.parts[1].toolName, t.parts[1].state, t.parts[1].input, t.parts[1].output.content], ['critique', 'output-available', { subject: 'X' }, '## Critique']);
  assert.deepEqual([t.parts[2].toolName, t.parts[2].state, t.parts[2].errorText], ['debate', 'output-error', 'refused']);

  // A running turn is replayed from its start, so its stored part is left out.
  const running = historyEntries(history, { dropAfterLastUser: true });
  assert.deepEqual(running.map((e) => ('user' in e ? `user:${e.user}` : 'turn')), ['user:Critique X', 'turn', 'user:Again']);
  assert.deepEqual(historyEntries(undefined), []);
});

test('snapshotOf fills what a snapshot leaves out', () => {
  assert.deepEqual(snapshotOf({ activeStep: 'A', sequenceIndex: 1, offeredTools: ['t'] }),
    { activeStep: 'A', sequenceIndex: 1, sequence: [], offeredTools: ['t'], previousStep: '', transition: false });
  assert.deepEqual(snapshotOf(null).offeredTools, []);
});
