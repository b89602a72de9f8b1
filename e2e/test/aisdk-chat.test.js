// The AI SDK's chat as useChat drives it, with its defaults: the Chat class
// (AbstractChat with a plain state, as @ai-sdk/react's Chat is with React's)
// over a DefaultChatTransport given only the agent's api URL. sendMessage,
// regenerate() and resumeStream() (what useChat's `resume: true` calls on
// mount) use the transport's default URLs and bodies, unchanged.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AbstractChat, DefaultChatTransport } from 'ai';
import { startServer } from '../lib/server.js';

let server;
// A slower offline model, so that a turn is still running when a second
// client resumes it.
before(async () => { server = await startServer({ env: { OFFLINE_MODEL_DELAY_MS: '4' } }); });
after(async () => { await server?.stop(); });

// ChatState is the framework-free state a Chat needs: what @ai-sdk/react
// keeps in React state, here in plain fields.
class ChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage(m) { this.messages = this.messages.concat(m); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
  snapshot(v) { return structuredClone(v); }
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new ChatState(messages) });
  }
}

const agent = 'research-assistant';

function newChat(id, errors) {
  return new Chat({
    id,
    transport: new DefaultChatTransport({ api: `${server.base}/api/chat/${agent}` }),
    onError: (e) => errors.push(e),
  });
}

const text = (m) => m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

async function session(id) {
  const res = await fetch(`${server.base}/api/sessions/${id}`);
  assert.equal(res.status, 200);
  return res.json();
}

test('sendMessage, then regenerate(): the answer is replaced, the user message is kept once', async () => {
  const errors = [];
  const chat = newChat(`e2e-${randomUUID()}`, errors);
  await chat.sendMessage({ text: 'Research the history of electric cars' });
  assert.deepEqual(errors, []);
  assert.equal(chat.status, 'ready');
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
  const firstAnswer = chat.messages[1];
  assert.ok(text(firstAnswer).length > 0);

  await chat.regenerate();
  assert.deepEqual(errors, []);
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
  const second = chat.messages[1];
  assert.notEqual(second.id, firstAnswer.id, 'a new turn answered');
  assert.ok(second.parts.some((p) => p.type.startsWith('tool-')), 'the regenerated answer ran the tools again');

  const s = await session(chat.id);
  const users = s.messages.filter((m) => m.role === 'user');
  assert.equal(users.length, 1, 'the user message is stored once');
  assert.equal(s.messages.at(-1).content, text(second), 'the stored answer is the regenerated one');

  // The conversation goes on after a regenerate.
  await chat.sendMessage({ text: 'And what about batteries?' });
  assert.deepEqual(errors, []);
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  assert.equal((await session(chat.id)).messages.filter((m) => m.role === 'user').length, 2);
});

test('resumeStream() (useChat resume: true) follows a running turn from the default URL, and is a no-op when none runs', async () => {
  const id = `e2e-${randomUUID()}`;
  const errors = [];
  const writer = newChat(id, errors);
  const sending = writer.sendMessage({ text: 'Research the history of electric cars' });
  // Wait until the server runs the turn.
  let running = false;
  for (let i = 0; i < 200 && !running; i++) {
    const res = await fetch(`${server.base}/api/sessions/${id}`);
    running = res.status === 200 && (await res.json()).turn?.running === true;
    if (!running) await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(running, 'the turn did not start');

  // A reloaded page: a new Chat with the same id and no messages resumes.
  const reader = newChat(id, errors);
  await reader.resumeStream();
  await sending;
  assert.deepEqual(errors, []);
  assert.equal(reader.status, 'ready');
  assert.equal(reader.messages.length, 1);
  const resumed = reader.messages[0];
  assert.equal(resumed.role, 'assistant');
  assert.equal(resumed.id, writer.messages[1].id, 'the same turn');
  assert.equal(text(resumed), text(writer.messages[1]), 'the whole answer, replayed from its start');
  const s = await session(id);
  assert.equal(text(resumed), s.messages.at(-1).content);

  // Nothing runs now: the server answers 204 and the chat stays as it is.
  const idle = newChat(id, errors);
  await idle.resumeStream();
  assert.deepEqual(errors, []);
  assert.equal(idle.status, 'ready');
  assert.deepEqual(idle.messages, []);
});
