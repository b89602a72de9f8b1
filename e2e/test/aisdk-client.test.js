// The AI SDK's Chat (AbstractChat with a plain state container, as
// @ai-sdk/react gives it a React one, and DefaultChatTransport, unchanged)
// with client-side tools through /api/chat, on a scripted
// OpenAI-compatible model: the transport's body brings the tools, a call
// of one comes as a tool part without output, onToolCall answers it with
// addToolOutput, sendAutomaticallyWhen sends it, and the same assistant
// message goes on through the builder's sequence [client_a, client_b].
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls } from 'ai';
import { startServer } from '../lib/server.js';
import { Chat } from '../lib/chat.js';
import { startMockModel } from '../lib/mockmodel.js';

let model;
let server;
before(async () => {
  model = await startMockModel();
  server = await startServer({
    env: {
      LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_MODEL: 'scripted', OPENAI_API_KEY: undefined,
      TEMPLATES_DIR: fileURLToPath(new URL('../templates', import.meta.url)),
    },
  });
});
after(async () => {
  await server?.stop();
  await model?.close();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('Chat with client-side tools: onToolCall + addToolOutput through a step\'s sequence', async () => {
  const from = model.requests.length;
  model.enqueue(
    { toolCalls: [{ name: 'client_a', arguments: { part: 'base' } }] },
    { toolCalls: [{ name: 'client_b', arguments: { part: 'roof' } }] },
    { text: 'Done.' },
  );
  const tools = ['client_a', 'client_b'].map((name) => ({
    name, description: `the browser's ${name}`,
    parameters: { type: 'object', properties: { part: { type: 'string' } } },
  }));
  const ran = [];
  const errors = [];
  let chat;
  chat = new Chat({
    id: `e2e-${randomUUID()}`,
    transport: new DefaultChatTransport({ api: `${server.base}/api/chat/builder`, body: { tools } }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: async ({ toolCall }) => {
      ran.push(toolCall.toolName);
      chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: `${toolCall.toolName} built the ${toolCall.input.part}` });
    },
    onError: (e) => errors.push(e),
  });
  await chat.sendMessage({ text: 'Please build a shed' });
  for (let i = 0; i < 500 && !(chat.status === 'ready' && chat.lastMessage?.parts.some((p) => p.type === 'text' && p.text === 'Done.')); i++) {
    await sleep(20);
  }
  assert.deepEqual(errors, []);
  assert.deepEqual(ran, ['client_a', 'client_b']);
  assert.equal(chat.messages.length, 2, 'one user message and one assistant message, which went on');
  const parts = chat.lastMessage.parts.filter((p) => p.type.startsWith('tool-') || p.type === 'text');
  assert.deepEqual(parts.map((p) => [p.type, p.type === 'text' ? p.text : p.state]), [
    ['tool-client_a', 'output-available'], ['tool-client_b', 'output-available'], ['text', 'Done.'],
  ]);
  // The model was offered client_a, then client_b, and read the results.
  const reqs = model.requests.slice(from);
  assert.deepEqual(reqs.map((r) => (r.tools ?? []).map((t) => t.function.name)).slice(0, 2), [['client_a'], ['client_b']]);
  assert.ok(reqs[2].messages.some((m) => m.role === 'tool' && m.content === 'client_b built the roof'));
  // The session recorded both calls: the sequence is done.
  const session = await (await fetch(`${server.base}/api/sessions/${chat.id}`)).json();
  assert.equal(session.state.activeStep, 'Build');
  assert.equal(session.state.sequenceIndex, 2);
  assert.deepEqual(session.state.recentlyUsedTools, ['client_a', 'client_b']);
});
