// The official `openai` client's chat.completions.runTools without a
// session, on a scripted OpenAI-compatible model (lib/mockmodel.js): the
// client keeps only what OpenAI's messages hold (its own calls and their
// results, none of the agent's), yet the editor's sequence think ->
// client_edit -> reflect reaches the position a session reaches, because
// the client call's id carries the agent's think, which the next request
// replays. On the memory store, and on a redis-server of its own (skipped
// without one, failed in CI).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { freePort, startServer } from '../lib/server.js';
import { startMockModel } from '../lib/mockmodel.js';

const stops = [];
after(async () => { for (const stop of stops.reverse()) await stop(); });

async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 10000;
  while (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() !== 'PONG') {
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`redis-server on ${port} did not answer`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `redis://127.0.0.1:${port}/0`, stop: () => new Promise((r) => { child.on('exit', r); child.kill('SIGTERM'); }) };
}

// editorTurns plays the editor's sequence with runTools and returns what
// the client ran, the final completion, and the tools each model call was
// offered.
async function editorTurns(client, model, options) {
  const from = model.requests.length;
  model.enqueue(
    { toolCalls: [{ name: 'think', arguments: { topic: 'the draft', reasoning: 'tighten the intro' } }] },
    { toolCalls: [{ name: 'client_edit', arguments: { part: 'intro' } }] },
    { toolCalls: [{ name: 'reflect', arguments: { topic: 'the edit', reflection: 'shorter and clearer' } }] },
    { text: 'Edited.' },
  );
  const ran = [];
  const runner = client.chat.completions.runTools({
    model: 'editor',
    messages: [{ role: 'user', content: 'Please edit my draft' }],
    tools: [{
      type: 'function',
      function: {
        name: 'client_edit', description: "the client's editor",
        parameters: { type: 'object', properties: { part: { type: 'string' } } },
        parse: JSON.parse,
        function: (args) => { ran.push(args.part); return `the ${args.part} is edited`; },
      },
    }],
  }, options);
  const completions = [];
  runner.on('chatCompletion', (c) => completions.push(c));
  assert.equal(await runner.finalContent(), 'Edited.');
  const offered = model.requests.slice(from).map((b) => (b.tools ?? []).map((t) => t.function.name).sort());
  return { ran, last: completions.at(-1), offered, messages: runner.messages };
}

for (const store of ['memory', 'redis']) {
  test(`runTools without a session reaches the session's position (think -> client_edit -> reflect, ${store})`, async (t) => {
    const env = {};
    if (store === 'redis') {
      if (spawnSync('redis-server', ['--version']).status !== 0) {
        if (process.env.CI === 'true') throw new Error('redis-server is required in CI');
        t.skip('redis-server not found');
        return;
      }
      const redis = await startRedis();
      stops.push(redis.stop);
      env.SESSION_STORE = redis.url;
    }
    const model = await startMockModel();
    stops.push(model.close);
    const server = await startServer({
      env: {
        ...env, LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_MODEL: 'scripted', OPENAI_API_KEY: undefined,
        TEMPLATES_DIR: fileURLToPath(new URL('../templates', import.meta.url)),
      },
    });
    stops.push(server.stop);
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });

    const stateless = await editorTurns(client, model);
    assert.deepEqual(stateless.ran, ['intro'], 'the client ran its edit once');
    assert.deepEqual(stateless.offered, [['think'], ['client_edit'], ['reflect'], ['client_edit', 'reflect', 'think']]);
    const call = stateless.messages.find((m) => m.role === 'assistant' && m.tool_calls?.length).tool_calls[0];
    assert.match(call.id, /_ad1[a-z2-7]+$/, 'the client call id carries the agent\'s calls');
    assert.equal(stateless.messages.filter((m) => m.role === 'tool')[0].tool_call_id, call.id, 'the client sent the id back with its result');
    for (const body of model.requests) {
      for (const m of body.messages) {
        for (const c of m.tool_calls ?? []) assert.match(c.id, /^[A-Za-z0-9_-]{1,40}$/, 'the model gets ids a provider takes');
      }
    }

    const sid = `e2e-${randomUUID()}`;
    const stateful = await editorTurns(client, model, { headers: { 'x-session-id': sid } });
    assert.deepEqual(stateful.ran, ['intro']);
    const session = await (await fetch(`${server.base}/api/sessions/${sid}`)).json();
    assert.deepEqual(session.state.recentlyUsedTools, ['think', 'client_edit', 'reflect']);
    const got = stateless.last.agentdock.orchestration;
    assert.equal(got.activeStep, 'Edit');
    assert.equal(got.sequenceIndex, 3);
    assert.equal(got.sequenceIndex, session.state.sequenceIndex, 'the stateless conversation reaches the session\'s position');
    assert.equal(got.activeStep, session.state.activeStep);
    assert.equal(stateful.last.agentdock.orchestration.sequenceIndex, got.sequenceIndex);
  });
}
