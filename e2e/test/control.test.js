// A person's control of a turn through the AI SDK's own client: the
// framework-agnostic Chat (AbstractChat, with a plain state container as
// @ai-sdk/react gives it a React one) and DefaultChatTransport, unchanged.
// Stop: POST /api/sessions/:id/stop ends the running turn with the abort
// chunk, finish and [DONE]; the Chat ends ready, not in error, with the
// partial answer. Approvals: the planner asks before a web search; the
// Chat's addToolApprovalResponse with sendAutomaticallyWhen:
// lastAssistantMessageIsCompleteWithApprovalResponses sends the answer,
// and the same assistant message goes on.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  DefaultChatTransport, isToolUIPart, lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';
import { startServer } from '../lib/server.js';
import { Chat } from '../lib/chat.js';

let server;
// The offline model writes a word every 40 ms, so that a turn is still
// running when the test stops it.
before(async () => { server = await startServer({ env: { OFFLINE_MODEL_DELAY_MS: '40' } }); });
after(async () => { await server?.stop(); });

function newChat(agentId, extra = {}) {
  const finishes = [];
  const errors = [];
  const chat = new Chat({
    id: `e2e-${randomUUID()}`,
    transport: new DefaultChatTransport({ api: `${server.base}/api/chat/${agentId}` }),
    onFinish: (f) => finishes.push(f),
    onError: (e) => errors.push(e),
    ...extra,
  });
  return { chat, finishes, errors };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, cond, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const textOf = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

async function getSession(id) {
  const res = await fetch(`${server.base}/api/sessions/${id}`);
  assert.equal(res.status, 200);
  return res.json();
}

test('stop: the server ends the turn with abort, finish and [DONE]; the Chat keeps the partial answer and sends again at once', async () => {
  const { chat, finishes, errors } = newChat('cognitive-reasoner');
  const words = Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ');
  const sent = chat.sendMessage({ text: `[offline:echo] ${words}` });
  await until('a few words', () => chat.lastMessage?.role === 'assistant' && textOf(chat.lastMessage).split(' ').length > 5);
  const res = await fetch(`${server.base}/api/sessions/${chat.id}/stop`, { method: 'POST' });
  assert.equal(res.status, 202);
  const started = Date.now();
  await sent;
  assert.ok(Date.now() - started < 5000, 'the stream did not end soon after the stop');
  assert.equal(chat.status, 'ready');
  assert.equal(chat.error, undefined);
  assert.deepEqual(errors, []);
  assert.equal(finishes.length, 1);
  assert.equal(finishes[0].isError, false);
  assert.equal(finishes[0].finishReason, 'other');
  const partial = textOf(chat.lastMessage);
  assert.ok(partial.length > 0 && partial.length < words.length, `the answer was not cut: ${partial.length} characters`);

  // The server kept the partial answer, and the session takes the next turn.
  const view = await getSession(chat.id);
  assert.equal(view.turn.running, false);
  assert.equal(view.messages.at(-1).role, 'assistant');
  assert.ok(words.startsWith(view.messages.at(-1).content.trim()), 'the saved answer is not the start of the answer');
  await chat.sendMessage({ text: '[offline:echo] next' });
  assert.equal(chat.status, 'ready');
  assert.equal(textOf(chat.lastMessage), 'next');

  const again = await fetch(`${server.base}/api/sessions/${chat.id}/stop`, { method: 'POST' });
  assert.equal(again.status, 204, 'stop with nothing running');
});

// searchPart returns the planner's search part of the last message.
function searchPart(chat) {
  return chat.lastMessage?.parts.find((p) => isToolUIPart(p) && p.type === 'tool-search');
}

async function askToSearch(chat) {
  await chat.sendMessage({ text: 'search the web for offsite venue prices' });
  const part = searchPart(chat);
  assert.ok(part, `no search part: ${JSON.stringify(chat.lastMessage?.parts.map((p) => p.type))}`);
  assert.equal(part.state, 'approval-requested');
  assert.equal(typeof part.approval?.id, 'string');
  assert.equal(chat.status, 'ready');
  const view = await getSession(chat.id);
  assert.deepEqual(view.pendingApprovals.map((a) => a.approvalId), [part.approval.id]);
  assert.ok(!view.state.recentlyUsedTools.includes('search'), 'a held call was recorded');
  return part;
}

test('approval loop: approved, the search runs in the next turn, is recorded, and the same message goes on', async () => {
  const { chat, errors } = newChat('planner', { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  const part = await askToSearch(chat);
  const assistantId = chat.lastMessage.id;
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
  await until('the answer after the approval', () => chat.status === 'ready' && searchPart(chat)?.state.startsWith('output') && textOf(chat.lastMessage).length > 0);
  assert.deepEqual(errors, []);
  assert.equal(chat.messages.length, 2, 'the answer went on in the same assistant message');
  assert.equal(chat.lastMessage.id, assistantId);
  // No search provider here: it asked the fake Wikipedia.
  const done = searchPart(chat);
  assert.equal(done.state, 'output-available');
  assert.match(done.output.content, /^## Search results from Wikipedia: /);
  const view = await getSession(chat.id);
  assert.ok(view.state.recentlyUsedTools.includes('search'), 'the approved call was not recorded');
  assert.deepEqual(view.pendingApprovals, []);
});

test('approval loop: denied with a reason, the search neither runs nor is recorded, and the model hears why', async () => {
  const { chat, errors } = newChat('planner', { sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses });
  const part = await askToSearch(chat);
  await chat.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'keep the plan private' });
  await until('the answer after the denial', () => chat.status === 'ready' && searchPart(chat)?.state === 'output-denied' && textOf(chat.lastMessage).length > 0);
  assert.deepEqual(errors, []);
  assert.equal(chat.messages.length, 2);
  const view = await getSession(chat.id);
  assert.ok(!view.state.recentlyUsedTools.includes('search'), 'a denied call was recorded');
  const result = view.messages.find((m) => m.role === 'tool' && m.toolName === 'search');
  assert.ok(result?.isError && result.content.includes('keep the plan private'), `the model heard ${JSON.stringify(result)}`);
});

test('approvals: an unknown or answered id is a clear 4xx', async () => {
  const { chat } = newChat('planner');
  const part = await askToSearch(chat);
  const post = (approvals) => fetch(`${server.base}/api/chat/planner`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ sessionId: chat.id, approvals }),
  });
  let res = await post([{ id: 'approval-unknown', approved: true }]);
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error.code, 'unknown_approval');
  res = await post([{ id: part.approval.id, approved: false }]);
  assert.equal(res.status, 200);
  await res.text();
  res = await post([{ id: part.approval.id, approved: true }]);
  assert.equal(res.status, 409);
  assert.equal((await res.json()).error.code, 'approval_answered');
});
