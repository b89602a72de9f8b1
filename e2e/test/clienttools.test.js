// The official `openai` client's helpers against agentdock serve on a
// scripted OpenAI-compatible model (lib/mockmodel.js, which keeps what the
// runtime sent it): chat.completions.runTools with two client tools
// through a step whose sequence is [client_a, client_b], and
// chat.completions.parse with a JSON schema on a turn that calls one of
// the agent's tools first.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startServer } from '../lib/server.js';
import { startMockModel } from '../lib/mockmodel.js';

let model;
let server;
let client;
before(async () => {
  model = await startMockModel();
  server = await startServer({
    env: {
      LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_MODEL: 'scripted', OPENAI_API_KEY: undefined,
      TEMPLATES_DIR: fileURLToPath(new URL('../templates', import.meta.url)),
    },
  });
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server?.stop();
  await model?.close();
});

const toolNames = (body) => (body.tools ?? []).map((t) => t.function.name);
const toolResults = (body) => body.messages.filter((m) => m.role === 'tool').map((m) => m.content);

test('runTools: two client tools run in the order of the step\'s sequence; a call out of order is refused', async () => {
  const from = model.requests.length;
  model.enqueue(
    { toolCalls: [{ name: 'client_b', arguments: {} }] }, // out of order: refused by the runtime
    { toolCalls: [{ name: 'client_a', arguments: { part: 'base' } }] },
    { toolCalls: [{ name: 'client_b', arguments: { part: 'roof' } }] },
    { text: 'Built the base, then the roof.' },
  );
  const ran = [];
  const tool = (name) => ({
    type: 'function',
    function: {
      name, description: `the client's ${name}`,
      parameters: { type: 'object', properties: { part: { type: 'string' } } },
      parse: JSON.parse,
      function: (args) => { ran.push(name); return `${name} built the ${args.part}`; },
    },
  });
  const runner = client.chat.completions.runTools({
    model: 'builder',
    messages: [{ role: 'user', content: 'Please build a shed' }],
    tools: [tool('client_a'), tool('client_b')],
  });
  const completions = [];
  runner.on('chatCompletion', (c) => completions.push(c));
  assert.equal(await runner.finalContent(), 'Built the base, then the roof.');
  assert.deepEqual(ran, ['client_a', 'client_b'], 'the client ran its tools in the sequence\'s order');
  assert.deepEqual(completions.map((c) => c.choices[0].finish_reason), ['tool_calls', 'tool_calls', 'stop']);

  const reqs = model.requests.slice(from);
  assert.equal(reqs.length, 4);
  // What the model was offered at each call: client_a, again client_a
  // after the refusal, then client_b, then the step's tools.
  assert.deepEqual(reqs.map(toolNames).slice(0, 3), [['client_a'], ['client_a'], ['client_b']]);
  const refusal = toolResults(reqs[1]).find((c) => c.startsWith('Refused:'));
  assert.match(refusal, /tool "client_b" is not available in step "Build", which requires the sequence client_a -> client_b and is at position 1/);
  assert.equal(completions[0].choices[0].message.tool_calls[0].function.name, 'client_a', 'the client never saw the refused call');
  assert.equal(completions[0].agentdock.orchestration.activeStep, 'Build');
  // The client's results reached the model as the calls' results.
  assert.ok(toolResults(reqs[3]).includes('client_b built the roof'));
});

test('parse: a JSON schema answer after a call of the agent\'s own tool, the schema sent with the tools, one repair', async () => {
  const from = model.requests.length;
  model.enqueue(
    { toolCalls: [{ name: 'think', arguments: { topic: 'sheds', reasoning: 'a shed needs a base and a roof' } }] },
    { text: 'A shed needs a base and a roof.' }, // not JSON: repaired
    { text: '{"parts":["base","roof"],"count":2}' },
  );
  const schema = {
    type: 'object', additionalProperties: false, required: ['parts', 'count'],
    properties: { parts: { type: 'array', items: { type: 'string' } }, count: { type: 'integer' } },
  };
  const completion = await client.chat.completions.parse({
    model: 'builder',
    messages: [{ role: 'user', content: 'What parts does a shed have?' }],
    response_format: { type: 'json_schema', json_schema: { name: 'parts', strict: true, schema } },
  });
  assert.deepEqual(completion.choices[0].message.parsed, { parts: ['base', 'roof'], count: 2 });
  assert.deepEqual(completion.agentdock.toolCalls.map((c) => c.name), ['think']);
  const reqs = model.requests.slice(from);
  assert.equal(reqs.length, 3);
  for (const r of reqs) {
    assert.deepEqual(r.response_format, { type: 'json_schema', json_schema: { name: 'parts', schema, strict: true } });
  }
  assert.ok(toolNames(reqs[0]).includes('think'), 'the format goes with the tools');
  assert.match(reqs[2].messages.at(-1).content, /not in the format asked for/);

  // A second mismatch is a clear error, which the client does not send
  // again even with its default retries: one turn, two model calls.
  const retrying = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused' });
  const asked = model.requests.length;
  model.enqueue({ text: 'still prose' }, { text: 'prose again' });
  await assert.rejects(
    retrying.chat.completions.parse({
      model: 'builder',
      messages: [{ role: 'user', content: 'Parts, please' }],
      response_format: { type: 'json_schema', json_schema: { name: 'parts', strict: true, schema } },
    }),
    (err) => err instanceof OpenAI.APIError && err.status === 422 && err.code === 'invalid_output' && err.headers?.get('x-should-retry') === 'false'
      && /did not match the response format/.test(err.message),
  );
  assert.equal(model.requests.length - asked, 2, 'the client sent the failed request again');
});
