// The server's stream read by the AI SDK itself: DefaultChatTransport (the
// transport useChat uses: its request body, its SSE parsing and its chunk
// schema validation) and readUIMessageStream (useChat's message assembly).
// If the wire drifts from the UI message stream protocol, the SDK rejects a
// chunk or assembles a different message, and this fails.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { DefaultChatTransport, isToolUIPart, readUIMessageStream } from 'ai';
import { startServer } from '../lib/server.js';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

// transportFor returns a transport for an agent and the response headers of
// its last request (useChat has no hook for them; a fetch wrapper is how
// applications read x-session-id).
function transportFor(agentId, sessionId) {
  const seen = { headers: null };
  const transport = new DefaultChatTransport({
    api: `${server.base}/api/chat/${agentId}`,
    headers: sessionId ? { 'x-session-id': sessionId } : {},
    fetch: async (url, init) => {
      const res = await fetch(url, init);
      seen.headers = res.headers;
      return res;
    },
  });
  return { transport, seen };
}

function userMessage(text) {
  return { id: `u-${Date.now()}`, role: 'user', parts: [{ type: 'text', text }] };
}

// assemble reads a chunk stream into the final UIMessage, as useChat does.
async function assemble(stream) {
  let last;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  assert.ok(last, 'the stream produced no message');
  return last;
}

test('AI SDK reads a Cognitive Reasoner turn: text, tools in sequence order, orchestration', async () => {
  const { transport, seen } = transportFor('cognitive-reasoner');
  const chatId = `e2e-${randomUUID()}`;
  const stream = await transport.sendMessages({
    chatId,
    messages: [userMessage('Critique the argument that remote work improves productivity')],
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: AbortSignal.timeout(30000),
  });
  const message = await assemble(stream);

  assert.equal(seen.headers.get('content-type')?.split(';')[0], 'text/event-stream');
  assert.equal(seen.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
  // useChat's chat ID names the session, so a useChat client needs no header.
  assert.equal(seen.headers.get('x-session-id'), chatId, 'the chat id is not the session id');
  const turnId = seen.headers.get('x-turn-id');
  assert.ok(turnId, 'x-turn-id header missing');
  assert.equal(message.id, turnId, 'the message id is the turn id from the start chunk');
  assert.equal(message.role, 'assistant');

  const text = message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.ok(text.trim().length > 0, 'no answer text');

  const tools = message.parts.filter(isToolUIPart);
  assert.deepEqual(tools.map((p) => p.type), ['tool-critique', 'tool-debate', 'tool-reflect'], 'tool parts in EvaluationMode order');
  for (const p of tools) {
    assert.equal(p.state, 'output-available', `${p.type} has no output`);
    assert.equal(typeof p.input, 'object', `${p.type} input is not an object`);
    assert.equal(typeof p.output?.content, 'string', `${p.type} output has no markdown content`);
    assert.ok(p.output.content.length > 0, `${p.type} output is empty`);
  }
  // The final answer comes after the last tool result.
  const lastTool = message.parts.lastIndexOf(tools.at(-1));
  assert.ok(message.parts.slice(lastTool + 1).some((p) => p.type === 'text' && p.text.trim()), 'no text after the last tool');

  const orch = message.parts.filter((p) => p.type === 'data-orchestration').map((p) => p.data);
  assert.ok(orch.length >= 2, `expected several orchestration parts, got ${orch.length}`);
  for (const d of orch) {
    assert.equal(typeof d.activeStep, 'string');
    assert.equal(typeof d.sequenceIndex, 'number');
    assert.ok(Array.isArray(d.offeredTools), 'offeredTools is not a list');
  }
  const evaluation = orch.filter((d) => d.activeStep === 'EvaluationMode');
  assert.ok(evaluation.length > 0, `never in EvaluationMode: ${JSON.stringify(orch.map((d) => d.activeStep))}`);
  assert.deepEqual(evaluation[0].sequence, ['critique', 'debate', 'reflect']);
  // The position in the sequence only moves forward and ends complete.
  const indexes = evaluation.map((d) => d.sequenceIndex);
  assert.deepEqual(indexes, [...indexes].sort((a, b) => a - b), `sequenceIndex went back: ${indexes}`);
  assert.equal(indexes.at(-1), 3);
  // While the sequence runs, exactly its next tool is offered.
  for (const d of evaluation) {
    if (d.sequenceIndex < d.sequence.length) assert.deepEqual(d.offeredTools, [d.sequence[d.sequenceIndex]], `at position ${d.sequenceIndex}`);
  }

  const usage = message.parts.filter((p) => p.type === 'data-usage').map((p) => p.data);
  const final = usage.filter((u) => u.final);
  assert.equal(final.length, 1, 'exactly one final usage part');
  assert.ok(final[0].total > 0, 'the final usage counts no tokens');
  assert.ok(final[0].session.total >= final[0].total, 'session usage is below the turn usage');
});

test('AI SDK continues a session through x-session-id and sees its usage grow', async () => {
  // A chat ID that is not a valid session ID: the server makes a session and
  // names it in x-session-id, which the client then sends back.
  const chatId = 'not a session id';
  const first = transportFor('cognitive-reasoner');
  const m1 = await assemble(await first.transport.sendMessages({
    chatId, messages: [userMessage('[offline:echo] first answer')], trigger: 'submit-message', messageId: undefined,
  }));
  const sid = first.seen.headers.get('x-session-id');
  assert.match(sid ?? '', /^[0-9a-f]{32}$/, 'a new session id is not 128-bit hex');
  const second = transportFor('cognitive-reasoner', sid);
  const m2 = await assemble(await second.transport.sendMessages({
    chatId, messages: [userMessage('[offline:echo] second answer')], trigger: 'submit-message', messageId: undefined,
  }));
  assert.equal(second.seen.headers.get('x-session-id'), sid, 'the session changed');
  const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(textOf(m1), 'first answer');
  assert.equal(textOf(m2), 'second answer');
  const sessionTotal = (m) => m.parts.filter((p) => p.type === 'data-usage' && p.data.final).at(-1).data.session.total;
  assert.ok(sessionTotal(m2) > sessionTotal(m1), 'the session usage did not grow across turns');
});

// Both majors of the AI SDK replay a turn continued by the plain approvals
// body ({sessionId, approvals}) onto the message that asked: the
// continuation's start chunk names that message, so the SDK appends the
// tool's output to the part that waits for it instead of failing with "No
// tool invocation found".
for (const [major, sdk] of [['6', () => import('ai')], ['7', () => import('ai7')]]) {
  test(`AI SDK ${major}: a turn continued by a plain approvals body replays onto the message it continues`, async () => {
    const { DefaultChatTransport: Transport, readUIMessageStream: read } = await sdk();
    const chatId = `e2e-${randomUUID()}`;
    const api = `${server.base}/api/chat/planner`;
    const messages = [userMessage('search the web for offsite venue prices')];
    const replay = async (stream, message) => {
      let last;
      for await (const m of read({ stream, message, terminateOnError: true })) last = m;
      assert.ok(last, 'the stream produced no message');
      return last;
    };
    const first = await replay(await new Transport({ api }).sendMessages({ chatId, messages, trigger: 'submit-message', messageId: undefined }));
    const asked = first.parts.find((p) => p.type === 'tool-search');
    assert.equal(asked?.state, 'approval-requested', `no search waits: ${JSON.stringify(first.parts.map((p) => p.type))}`);

    const plain = new Transport({ api, prepareSendMessagesRequest: () => ({ body: { sessionId: chatId, approvals: [{ id: asked.approval.id, approved: false, reason: 'not now' }] } }) });
    const continued = await replay(await plain.sendMessages({ chatId, messages: [...messages, first], trigger: 'submit-message', messageId: undefined }), first);
    assert.equal(continued.id, first.id, 'the continuation streamed under another message');
    const answered = continued.parts.filter((p) => p.type === 'tool-search');
    assert.equal(answered.length, 1, 'the search part was duplicated');
    assert.equal(answered[0].state, 'output-denied');
    assert.ok(continued.parts.slice(continued.parts.indexOf(answered[0]) + 1).some((p) => p.type === 'text' && p.text.trim()), 'no answer after the denial');
  });
}
