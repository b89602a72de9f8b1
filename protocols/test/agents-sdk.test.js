// The OpenAI Agents SDK (@openai/agents) runs agents whose model is an
// agentdock agent, over /v1/responses and over /v1/chat/completions: a
// triage agent with a function tool of the client and a handoff to a
// specialist, both on an agentdock agent whose own tool, think, runs on the
// server. The SDK must run its own tool, take the handoff, and never be
// handed the agent's think as a call of its own ("Tool think not found in
// agent Triage"), though it sends the server's output back as it came.
// The agentdock agent's model is a scripted OpenAI-compatible server
// (e2e's mock model), so that every step is known.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { z } from 'zod';
import { Agent, run, tool, setTracingDisabled, OpenAIResponsesModel, OpenAIChatCompletionsModel } from '@openai/agents';
import { startServer } from '../lib/env.js';
import { startMockModel } from '../../e2e/lib/mockmodel.js';

// The agentdock agent the SDK's agents run on: its own tool is think.
const template = {
  agentId: 'sdk-planner',
  name: 'SDK Planner',
  description: 'Thinks before it answers; runs the client tools it is given.',
  personality: 'You plan carefully.',
  nodes: ['llm.openai', 'think'],
  nodeConfigurations: { 'llm.openai': { model: 'scripted' } },
};

let server;
let model;
let dir;
before(async () => {
  setTracingDisabled(true);
  dir = mkdtempSync(join(tmpdir(), 'agents-sdk-'));
  mkdirSync(join(dir, 'sdk-planner'));
  writeFileSync(join(dir, 'sdk-planner', 'template.json'), JSON.stringify(template));
  model = await startMockModel();
  server = await startServer({
    env: {
      LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_MODEL: 'scripted', OPENAI_API_KEY: undefined,
      TEMPLATES_DIR: dir, LOG_LEVEL: 'warn',
    },
  });
});
after(async () => {
  await server?.stop();
  await model?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const think = (topic) => ({ name: 'think', arguments: { topic, reasoning: `what matters for ${topic}` } });

for (const [api, conversation] of [['responses', false], ['responses', true], ['chat_completions', false]]) {
  const how = conversation ? ' in a conversation the server keeps' : '';
  test(`the Agents SDK over ${api}${how}: a function tool, a handoff, and the agent's own think`, async () => {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused' });
    const modelOf = () => (api === 'responses' ? new OpenAIResponsesModel(client, 'sdk-planner') : new OpenAIChatCompletionsModel(client, 'sdk-planner'));
    const asked = [];
    const getWeather = tool({
      name: 'get_weather',
      description: 'The weather in a city.',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => { asked.push(city); return `Rain in ${city}, 12°C.`; },
    });
    const specialist = new Agent({ name: 'Specialist', instructions: 'You pack for trips.', model: modelOf() });
    const triage = new Agent({
      name: 'Triage',
      instructions: 'Check the weather, then hand packing over to the specialist.',
      model: modelOf(),
      tools: [getWeather],
      handoffs: [specialist],
      // One call per answer: the server is asked with parallel_tool_calls false.
      modelSettings: { parallelToolCalls: false },
    });

    const before = model.requests.length;
    model.enqueue(
      // Triage's first request: the agent thinks (the server runs it),
      // then calls the client's get_weather (the SDK runs it).
      { toolCalls: [think('the trip')] },
      { toolCalls: [{ name: 'get_weather', arguments: { city: 'Paris' } }] },
      // Its second: the handoff, a client tool of the SDK's.
      { toolCalls: [{ name: 'transfer_to_Specialist', arguments: {} }] },
      // The specialist thinks and answers.
      { toolCalls: [think('packing')] },
      { text: 'Pack an umbrella and a warm coat for Paris.' },
    );
    // With conversationId the server keeps the conversation (a session),
    // and the SDK sends only what is new; without, the SDK sends its
    // history every time.
    const conversationId = conversation ? `sdk-${randomUUID()}` : undefined;
    const result = await run(triage, 'I am going to Paris tomorrow: what should I pack?', { conversationId });

    assert.equal(result.finalOutput, 'Pack an umbrella and a warm coat for Paris.');
    assert.equal(result.lastAgent.name, 'Specialist');
    assert.deepEqual(asked, ['Paris'], 'the SDK ran its own tool once');
    assert.equal(model.pending(), 0, 'every scripted answer was used');
    const sent = model.requests.slice(before);
    assert.equal(sent.length, 5);
    // The model saw the think results the server's runs gave, and the
    // client's tool output the SDK sent.
    const toolText = (body) => body.messages.filter((m) => m.role === 'tool').map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
    assert.ok(toolText(sent[2]).some((c) => c.includes('Rain in Paris')), 'the weather reached the model');
    assert.ok(sent.slice(0, 3).every((body) => body.parallel_tool_calls === false), 'parallel_tool_calls false reached the provider');
    if (conversation) {
      // The session kept the agent's own first think: the specialist's
      // model call reads it, though the SDK never sent it back.
      assert.ok(toolText(sent[3]).some((c) => c.includes('Thinking: the trip')), 'the session holds the first think');
    }

    // What the SDK kept: its own call and the handoff as function calls,
    // the agent's think never as one.
    const calls = result.history.filter((i) => i.type === 'function_call').map((i) => i.name);
    assert.deepEqual(calls, ['get_weather', 'transfer_to_Specialist']);
    if (api === 'responses') {
      // The server's own calls came as agentdock:tool_call items, which
      // the SDK reads as items of a type it does not know.
      const own = result.rawResponses.flatMap((r) => r.output).filter((i) => i.type === 'unknown' && i.providerData?.type === 'agentdock:tool_call');
      assert.deepEqual(own.map((i) => i.providerData.name), ['think', 'think']);
      assert.ok(own.every((i) => i.providerData.status === 'completed' && typeof i.providerData.output === 'string'));
    }
  });
}
