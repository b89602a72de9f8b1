// Unit tests of the page's DOM-free modules (web/js/api.js and state.js),
// run under node: the SSE framing, the chunk reducer (approvals, denials,
// a stopped turn), the agent list mapping, the session store and the
// conversation list. The browser test covers the same code end to end;
// these pin the edge cases a live server rarely produces.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { approvalsBody, backoffDelay, chatBody, normalizeAgent, parseEventId, parseSSE, stopTurn } from '../../web/js/api.js';
import {
  Conversations, Sessions, answerApproval, applyChunk, conversationTime, groupConversations, historyEntries, maxConversations, newTurn, notConfigured,
  pendingApprovals, searchSource, snapshotOf, textOf,
} from '../../web/js/state.js';
import { guardrailText } from '../../web/js/guardrail.js';

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

test('parseEventId splits turn, sequence and takeovers', () => {
  assert.deepEqual(parseEventId('abc:12'), { turn: 'abc', seq: 12, restart: 0 });
  assert.deepEqual(parseEventId('abc:12.2'), { turn: 'abc', seq: 12, restart: 2 });
  assert.deepEqual(parseEventId('a:b:3'), { turn: 'a:b', seq: 3, restart: 0 });
  assert.deepEqual(parseEventId('abc'), { turn: 'abc', seq: -1, restart: 0 });
  assert.deepEqual(parseEventId('abc:x'), { turn: 'abc', seq: -1, restart: 0 });
  assert.deepEqual(parseEventId('abc:3.'), { turn: 'abc', seq: -1, restart: 0 });
  assert.deepEqual(parseEventId(null), { turn: '', seq: -1, restart: 0 });
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

test('applyChunk honours data-restart: the parts begun after its since, and those it names, are dropped', () => {
  const turn = newTurn();
  const frames = [
    ['T:1', { type: 'start', messageId: 'T' }],
    ['T:2', { type: 'text-start', id: 'a' }],
    ['T:3', { type: 'text-delta', id: 'a', delta: 'Searching. ' }],
    ['T:4', { type: 'text-end', id: 'a' }],
    ['T:5', { type: 'tool-input-available', toolCallId: 'c1', toolName: 'search', input: { q: 'x' } }],
    ['T:6', { type: 'tool-output-available', toolCallId: 'c1', output: { content: 'found' } }],
    ['T:7', { type: 'text-start', id: 'b' }],
    ['T:8', { type: 'text-delta', id: 'b', delta: 'The answer is' }],
    // The server stopped here; the one that took the turn over shows the
    // step of text b again, and the frames it never had (T:8) are gone.
    ['T:7.1', { type: 'data-restart', data: { step: 2, since: 6, textIds: [], toolCallIds: [] } }],
    ['T:8.1', { type: 'text-start', id: 'b2' }],
    ['T:9.1', { type: 'text-delta', id: 'b2', delta: 'The answer is 42.' }],
    ['T:10.1', { type: 'text-end', id: 'b2' }],
    ['T:11.1', { type: 'finish' }],
  ];
  for (const [id, c] of frames) applyChunk(turn, c, id);
  assert.deepEqual(turn.parts.filter((p) => p.kind === 'text').map((p) => p.text), ['Searching. ', 'The answer is 42.']);
  assert.deepEqual(turn.parts.map((p) => p.kind), ['text', 'tool', 'text']);
  assert.equal(turn.restarts, 1);

  // A part named by the restart goes, wherever it began.
  const named = newTurn();
  applyChunk(named, { type: 'text-start', id: 'a' }, 'U:2');
  applyChunk(named, { type: 'text-delta', id: 'a', delta: 'half' }, 'U:3');
  applyChunk(named, { type: 'data-restart', data: { step: 1, since: 3, textIds: ['a'] } }, 'U:4.1');
  applyChunk(named, { type: 'text-delta', id: 'a2', delta: 'whole' }, 'U:5.1');
  assert.equal(textOf(named), 'whole');
});

test('applyChunk sums per-call usage until the final total', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'data-usage', data: { prompt: 3, completion: 2, final: false } });
  applyChunk(turn, { type: 'data-usage', data: { prompt: 4, completion: 1, total: 5, final: false } });
  assert.deepEqual(turn.usage, { prompt: 7, completion: 3, total: 10, final: false });
});

test('applyChunk keeps the cached input the server reports, summed per call', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'data-usage', data: { prompt: 3000, completion: 2, total: 3002, cacheRead: 2048, final: false } });
  applyChunk(turn, { type: 'data-usage', data: { prompt: 3100, completion: 1, total: 3101, cacheRead: 2944, cacheWrite: 128, final: false,
    session: { prompt: 6100, completion: 3, total: 6103, cacheRead: 4992, cacheWrite: 128 } } });
  assert.deepEqual(turn.usage, { prompt: 6100, completion: 3, total: 6103, cacheRead: 4992, cacheWrite: 128, final: false });
  assert.deepEqual(turn.sessionUsage, { prompt: 6100, completion: 3, total: 6103, cacheRead: 4992, cacheWrite: 128 });
  applyChunk(turn, { type: 'data-usage', data: { prompt: 6100, completion: 3, total: 6103, cacheRead: 4992, final: true } });
  assert.deepEqual(turn.usage, { prompt: 6100, completion: 3, total: 6103, cacheRead: 4992, final: true });
});

test('applyChunk keeps the cost the server reports, summed per call', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'data-usage', data: { prompt: 1000, completion: 10, total: 1010, cost: 0.0002, final: false } });
  applyChunk(turn, { type: 'data-usage', data: { prompt: 1000, completion: 10, total: 1010, cost: 0.0003, final: false,
    model: { config: 'llm.cheap', provider: 'openai', model: 'gpt-4o-mini' }, session: { prompt: 2000, completion: 20, total: 2020, cost: 0.0005 } } });
  assert.ok(Math.abs(turn.usage.cost - 0.0005) < 1e-12);
  assert.deepEqual(turn.sessionUsage, { prompt: 2000, completion: 20, total: 2020, cost: 0.0005 });
  // An unpriced model's usage carries no cost.
  const plain = newTurn();
  applyChunk(plain, { type: 'data-usage', data: { prompt: 3, completion: 2, total: 5, final: true } });
  assert.deepEqual(plain.usage, { prompt: 3, completion: 2, total: 5, final: true });
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

test('a compaction shows where it happened, live and from the history', () => {
  const live = newTurn();
  applyChunk(live, { type: 'data-compaction', data: { from: 1, through: 4, kept: 2, inputBefore: 3100, inputAfter: 900, summary: 'The user is Ada.', by: 'offline' } });
  assert.deepEqual(live.parts.map((p) => [p.kind, p.from, p.through, p.summary]), [['compaction', 1, 4, 'The user is Ada.']]);
  const entries = historyEntries([
    { role: 'user', content: 'turn five' },
    { role: 'summary', content: 'The user is Ada.', summary: { from: 1, through: 4, kept: 2, tokens: 6, by: 'offline' } },
    { role: 'assistant', content: 'Five.' },
  ]);
  const t = entries[1].turn;
  assert.deepEqual(t.parts.map((p) => p.kind), ['compaction', 'text']);
  assert.deepEqual([t.parts[0].from, t.parts[0].through, t.parts[0].summary], [1, 4, 'The user is Ada.']);
});

test('snapshotOf fills what a snapshot leaves out', () => {
  assert.deepEqual(snapshotOf({ activeStep: 'A', sequenceIndex: 1, offeredTools: ['t'] }),
    { activeStep: 'A', sequenceIndex: 1, sequence: [], offeredTools: ['t'], previousStep: '', transition: false });
  assert.deepEqual(snapshotOf(null).offeredTools, []);
});

// A Storage stand-in backed by a Map, as localStorage behaves.
function memoryStorage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k) };
}

test('applyChunk: an approval request, the answers, a denial and an approved output', () => {
  const turn = newTurn();
  for (const c of [
    { type: 'tool-input-start', toolCallId: 'c1', toolName: 'search' },
    { type: 'tool-input-available', toolCallId: 'c1', toolName: 'search', input: { query: 'q' } },
    { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' },
    { type: 'tool-input-available', toolCallId: 'c2', toolName: 'think', input: {} },
    { type: 'tool-approval-request', approvalId: 'a2', toolCallId: 'c2' },
    { type: 'finish', finishReason: 'tool-calls' },
  ]) applyChunk(turn, c);
  assert.equal(turn.finishReason, 'tool-calls');
  assert.deepEqual(pendingApprovals(turn).map((p) => `${p.toolName}:${p.approvalId}`), ['search:a1', 'think:a2']);
  // Answers go out once every waiting call is decided, with the reasons given.
  assert.equal(answerApproval(turn, 'a2', false, '  too slow '), null);
  assert.equal(answerApproval(turn, 'nope', true), null, 'an unknown approval is no answer');
  assert.deepEqual(answerApproval(turn, 'a1', true), [{ id: 'a1', approved: true }, { id: 'a2', approved: false, reason: 'too slow' }]);
  assert.equal(answerApproval(turn, 'a1', false), null, 'an answered approval is not answered again');
  // The turn that carries them out reports each call's end.
  applyChunk(turn, { type: 'start', messageId: 'same' });
  applyChunk(turn, { type: 'tool-output-available', toolCallId: 'c1', output: { content: 'found' } });
  applyChunk(turn, { type: 'tool-output-denied', toolCallId: 'c2' });
  assert.deepEqual(turn.parts.map((p) => p.state), ['output-available', 'output-denied']);
  assert.deepEqual(pendingApprovals(turn), []);
});

test('applyChunk: a stopped turn ends with a stopped part and its text done', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'text-start', id: 't' });
  applyChunk(turn, { type: 'text-delta', id: 't', delta: 'half an ans' });
  applyChunk(turn, { type: 'abort', reason: 'stopped by the user' });
  applyChunk(turn, { type: 'finish', finishReason: 'other' });
  assert.equal(turn.finished, true);
  assert.deepEqual(turn.parts.map((p) => p.kind), ['text', 'stopped']);
  assert.equal(turn.parts[0].done, true);
  assert.equal(turn.parts[1].reason, 'stopped by the user');
  assert.equal(textOf(turn), 'half an ans');
});

test('notConfigured tells a missing service from a failure', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'tool-output-error', toolCallId: 'c', toolName: 'search', errorText: 'tool "search" failed: web search is not configured: set SEARXNG_URL' });
  applyChunk(turn, { type: 'tool-output-error', toolCallId: 'd', toolName: 'think', errorText: 'tool "think" failed: field "topic" is required' });
  assert.deepEqual(turn.parts.map((p) => p.notConfigured), [true, false]);
  assert.equal(notConfigured('Search is NOT configured'), true);
  assert.equal(notConfigured(undefined), false);
});

test('historyEntries shows denied calls and the calls that still wait', () => {
  const entries = historyEntries([
    { role: 'user', content: 'go' },
    { role: 'assistant', toolCalls: [{ id: 'c1', name: 'search', arguments: {} }, { id: 'c2', name: 'think', arguments: {} }, { id: 'c3', name: 'search', arguments: {} }] },
    { role: 'tool', toolCallId: 'c1', toolName: 'search', content: 'The user declined', isError: true, denied: true },
    { role: 'tool', toolCallId: 'c2', toolName: 'think', content: 'ok' },
  ], { pendingApprovals: [{ approvalId: 'a3', toolCallId: 'c3', toolName: 'search' }, { approvalId: 'ax', toolCallId: 'elsewhere' }] });
  const turn = entries[1].turn;
  assert.deepEqual(turn.parts.map((p) => `${p.toolCallId}:${p.state}`), ['c1:output-denied', 'c2:output-available', 'c3:approval-requested']);
  assert.equal(turn.parts[2].approvalId, 'a3');
});

test('approvalsBody and chatBody with a trigger', () => {
  assert.deepEqual(approvalsBody('s1234567', [{ id: 'a', approved: true }]), { sessionId: 's1234567', approvals: [{ id: 'a', approved: true }] });
  assert.equal(chatBody('again', 's1234567', { trigger: 'regenerate-message' }).trigger, 'regenerate-message');
  assert.equal('trigger' in chatBody('hi'), false);
});

test('stopTurn: 202 is true, 204 false, an error is an ApiError', async () => {
  const calls = [];
  const answer = (status, body = '') => async (url, init) => {
    calls.push([url, init.method]);
    return new Response(status === 204 ? null : body, { status, headers: { 'content-type': 'application/json' } });
  };
  assert.equal(await stopTurn('s1234567', { fetchImpl: answer(202, '{"status":"stopping"}'), base: 'http://x' }), true);
  assert.deepEqual(calls[0], ['http://x/api/sessions/s1234567/stop', 'POST']);
  assert.equal(await stopTurn('s1234567', { fetchImpl: answer(204) }), false);
  await assert.rejects(stopTurn('s1234567', { fetchImpl: answer(404, '{"error":{"code":"session_not_found","message":"no such session"}}') }),
    (err) => err.name === 'ApiError' && err.status === 404 && err.code === 'session_not_found');
});

test('Conversations: newest first, one entry per session, bounded, shared through storage', () => {
  const storage = memoryStorage();
  const a = new Conversations(storage);
  a.touch({ id: 's1', agentId: 'planner', title: 'Plan the offsite', now: 1 });
  a.touch({ id: 's2', agentId: 'cognitive-reasoner', title: 'Critique', now: 2 });
  a.touch({ id: 's1', agentId: 'planner', title: 'a later message', now: 3 });
  // Another tab (another instance on the same storage) sees the same list.
  const b = new Conversations(storage);
  assert.deepEqual(b.list().map((c) => `${c.id}:${c.title}`), ['s1:Plan the offsite', 's2:Critique']);
  b.remove('s2');
  assert.deepEqual(a.list().map((c) => c.id), ['s1']);
  for (let i = 0; i < maxConversations + 5; i++) a.touch({ id: `x${i}`, agentId: 'planner', now: 10 + i });
  assert.equal(a.list().length, maxConversations);
  assert.equal(a.list().at(-1).id, 'x5', 'the oldest were not dropped first');
  // Broken or disabled storage: the list lives as long as the page.
  storage.setItem('agentdock.conversations', '{not json');
  assert.doesNotThrow(() => a.list());
  const off = new Conversations({ getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); } });
  off.touch({ id: 's9', agentId: 'planner', title: 't' });
  assert.deepEqual(off.list().map((c) => c.id), ['s9']);
});

test('a data-guardrail chunk is a part that names the guardrail, never the text', () => {
  const turn = newTurn();
  applyChunk(turn, { type: 'text-start', id: 't1' });
  applyChunk(turn, { type: 'text-delta', id: 't1', delta: 'Your card ' });
  applyChunk(turn, { type: 'data-guardrail', data: { name: 'cards', on: 'output', action: 'redact', kind: 'credit_card', message: 'The guardrail "cards" redacted a credit_card in the answer.' } });
  applyChunk(turn, { type: 'text-delta', id: 't1', delta: '[redacted:credit_card] is on file.' });
  const g = turn.parts.find((p) => p.kind === 'guardrail');
  assert.deepEqual({ name: g.name, on: g.on, action: g.action, matched: g.matched }, { name: 'cards', on: 'output', action: 'redact', matched: 'credit_card' });
  assert.equal(guardrailText(g), 'Guardrail “cards” redacted a credit card in the answer.');
  assert.equal(guardrailText({ name: 'keys', on: 'tool_result', action: 'redact', matched: 'openai_key', toolName: 'vault' }),
    "Guardrail “keys” redacted an openai key in a tool's result (vault).");
  assert.equal(textOf(turn), 'Your card [redacted:credit_card] is on file.');
});

test('groupConversations sorts by the local calendar: Today, Yesterday, the week, earlier', () => {
  const now = new Date(2026, 2, 12, 15, 0).getTime();
  const at = (d, h, m = 0) => new Date(2026, 2, d, h, m).getTime();
  const list = [
    { id: 'week', updatedAt: at(8, 10) },
    { id: 'midnight', updatedAt: at(12, 0) },
    { id: 'yesterday-late', updatedAt: at(11, 23, 59) },
    { id: 'future', updatedAt: at(12, 18) },
    { id: 'old', updatedAt: new Date(2025, 11, 24, 10).getTime() },
    { id: 'eight-days', updatedAt: at(4, 12) },
    { id: 'undated', updatedAt: 0 },
  ];
  assert.deepEqual(groupConversations(list, now).map((g) => [g.label, g.items.map((c) => c.id)]), [
    ['Today', ['future', 'midnight']],
    ['Yesterday', ['yesterday-late']],
    ['Previous 7 days', ['week']],
    ['Earlier', ['eight-days', 'old', 'undated']],
  ]);
  assert.deepEqual(groupConversations([], now), []);
});

test('conversationTime says the time, the weekday within the week, the date before', () => {
  const now = new Date(2026, 2, 12, 15, 0).getTime();
  assert.equal(conversationTime(new Date(2026, 2, 12, 9, 30).getTime(), now, 'en-US'), '9:30 AM');
  assert.equal(conversationTime(new Date(2026, 2, 11, 18, 10).getTime(), now, 'en-US'), '6:10 PM');
  assert.equal(conversationTime(new Date(2026, 2, 8, 11, 0).getTime(), now, 'en-US'), 'Sun 11:00 AM');
  assert.equal(conversationTime(new Date(2026, 0, 5, 11, 0).getTime(), now, 'en-US'), 'Jan 5');
  assert.equal(conversationTime(new Date(2025, 11, 24, 11, 0).getTime(), now, 'en-US'), 'Dec 24, 2025');
  assert.equal(conversationTime(0, now, 'en-US'), '');
});

test('searchSource reads where search results come from and how many there are', () => {
  assert.deepEqual(searchSource('## Search results from Wikipedia: heat pumps\n\n1. [Heat pump](https://x)\n   A heat pump…\n\n2. [Ground source](https://y)\n'), { source: 'Wikipedia', count: 2 });
  assert.deepEqual(searchSource('## Search results: zzqx\n\nNo results found. Try a broader query.\n'), { source: '', count: 0 });
  assert.equal(searchSource('### Critique\n\n1. [not a search](https://x)'), null);
  assert.equal(searchSource(undefined), null);
});

test('applyChunk folds the work of an asked agent under the call that asked it', () => {
  const turn = newTurn();
  const agent = (event) => ({ type: 'data-agent', transient: true, data: { toolCallId: 'c1', toolName: 'ask_probe', agent: 'probe', event } });
  for (const c of [
    { type: 'tool-input-available', toolCallId: 'c1', toolName: 'ask_probe', input: { message: 'tea?' } },
    agent({ type: 'tool-call', toolCall: { id: 'p1', name: 'search', arguments: { q: 'tea' } } }),
    agent({ type: 'tool-result', toolResult: { callId: 'p1', name: 'search', content: 'x', isError: true } }),
    agent({ type: 'text-delta', text: 'Tea ' }),
    agent({ type: 'text-delta', text: 'cools.' }),
    agent({ type: 'approval', toolCall: { id: 'p2', name: 'fetch', arguments: { url: 'u' } }, approval: { id: 'a1', toolCallId: 'p2' } }),
    { type: 'tool-approval-request', toolCallId: 'c1', approvalId: 'a1' },
  ]) applyChunk(turn, c);
  const [part] = turn.parts;
  assert.equal(turn.parts.length, 1);
  assert.deepEqual(part.agent, { name: 'probe', text: 'Tea cools.', calls: [{ id: 'p1', name: 'search', state: 'failed' }],
    asks: { approvalId: 'a1', agent: 'probe', toolName: 'fetch', input: { url: 'u' } }, failed: '', steps: [] });
  assert.equal(part.state, 'approval-requested');

  // The agent's turn taken over by another server: its step shows again.
  const taken = newTurn();
  for (const ev of [{ type: 'step-start' }, { type: 'text-delta', text: 'First step. ' }, { type: 'step-start' }, { type: 'text-delta', text: 'Cut sho' },
    { type: 'restart', restart: { step: 2, since: 9 } }, { type: 'step-start' }, { type: 'text-delta', text: 'Second step.' }]) {
    applyChunk(taken, agent(ev));
  }
  assert.equal(taken.parts[0].agent.text, 'First step. Second step.');

  // A restored session says the same of a call that still waits.
  const [, entry] = historyEntries(
    [{ role: 'user', content: 'tea?' }, { role: 'assistant', toolCalls: [{ id: 'c1', name: 'ask_probe', arguments: { message: 'tea?' } }] }],
    { pendingApprovals: [{ approvalId: 'a1', toolCallId: 'c1', toolName: 'ask_probe', agentCall: { agent: 'probe', toolName: 'fetch', input: { url: 'u' } } }] });
  assert.deepEqual(entry.turn.parts[0].agent.asks, { approvalId: 'a1', agent: 'probe', toolName: 'fetch', input: { url: 'u' } });
  assert.equal(entry.turn.parts[0].state, 'approval-requested');
});
