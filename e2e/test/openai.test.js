// The official `openai` npm client, unchanged, against the OpenAI-compatible
// endpoints: chat.completions with a whole conversation and no session (the
// way OpenAI-style front ends call it), with parameters it refuses (a 400
// naming them), streaming and not; and the Responses API, streaming and
// not, chained by previous_response_id and read back by ID.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { startServer } from '../lib/server.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => { await server?.stop(); });

const agent = 'research-assistant';
const first = 'Research the history of electric cars';
const followUp = 'And what about batteries?';

// toOpenAI turns a session's stored history into the messages an OpenAI
// client holds.
function toOpenAI(history) {
  return history.map((m) => {
    if (m.role === 'assistant' && m.toolCalls?.length) {
      return {
        role: 'assistant', content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
      };
    }
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
    return { role: m.role, content: m.content };
  });
}

// conversation runs a first turn in a session and returns its history as
// OpenAI messages.
async function conversation() {
  const user = `e2e-${randomUUID()}`;
  const r = await client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: first }], user });
  assert.ok(r.agentdock.toolCalls.some((c) => c.name === 'search'), 'the first turn searched');
  const sid = r.agentdock.sessionId;
  const session = await (await fetch(`${server.base}/api/sessions/${sid}`)).json();
  return { sid, messages: toOpenAI(session.messages) };
}

test('chat.completions without a session: the earlier messages are the conversation', async () => {
  const { sid, messages } = await conversation();
  const history = [{ role: 'system', content: 'You are helpful.' }, ...messages, { role: 'user', content: followUp }];

  const { data: stateless, response } = await client.chat.completions.create({ model: agent, messages: history }).withResponse();
  assert.equal(response.headers.get('x-session-id'), null, 'a stateless answer names no session');
  assert.equal(stateless.object, 'chat.completion');
  assert.ok(stateless.choices[0].message.content.length > 0);
  // FollowUp needs a search earlier in the conversation and a message
  // starting with "and": only the replayed history can reach it.
  assert.equal(stateless.agentdock.orchestration.activeStep, 'FollowUp');

  const alone = await client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: followUp }] });
  assert.equal(alone.agentdock.orchestration.activeStep, 'Conversation', 'without the history the step is the default');

  // The session's own next turn takes the same step and the same tools.
  const own = await client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: followUp }] },
    { headers: { 'x-session-id': sid } });
  assert.equal(own.agentdock.orchestration.activeStep, 'FollowUp');
  assert.deepEqual((stateless.agentdock.toolCalls ?? []).map((c) => c.name), (own.agentdock.toolCalls ?? []).map((c) => c.name));

  // Streaming, the same conversation.
  const stream = await client.chat.completions.create({ model: agent, messages: history, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(finish, 'stop');
  assert.ok(usage.total_tokens > 0);
  assert.equal(text, stateless.choices[0].message.content, 'the streamed answer is the non-streamed one');
});

test('chat.completions: unsupported parameters are refused, naming them', async () => {
  for (const [params, param] of [
    [{ n: 2 }, 'n'],
    [{ logprobs: true }, 'logprobs'],
    [{ tools: [{ type: 'function', function: { name: 'search', parameters: { type: 'object', properties: {} } } }] }, 'tools[0]'],
  ]) {
    await assert.rejects(
      client.chat.completions.create({ model: agent, messages: [{ role: 'user', content: 'hi' }], ...params }),
      (err) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${param}: ${err}`);
        assert.equal(err.param, param);
        if (param === 'tools[0]') assert.match(err.message, /has the name of the agent's own tool "search"/);
        return true;
      },
    );
  }
  // A malformed conversation: a call without its result.
  await assert.rejects(
    client.chat.completions.create({
      model: agent,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
        { role: 'user', content: 'thanks' },
      ],
    }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'messages[1]' && /call_1/.test(err.message),
  );
  // A conversation holding a call of a tool the agent does not have (an
  // earlier agent's, a client tool an earlier request brought) is history:
  // answered, the call counted as not run.
  const r = await client.chat.completions.create({
    model: agent,
    messages: [
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      { role: 'user', content: 'thanks' },
    ],
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.choices[0].message.content.length > 0);
});

test('responses.create, not streaming, then streaming and chained by previous_response_id', async () => {
  const r1 = await client.responses.create({ model: agent, input: first, metadata: { run: 'e2e' } });
  assert.equal(r1.object, 'response');
  assert.equal(r1.status, 'completed');
  assert.ok(r1.output_text.length > 0, 'output_text is assembled by the client');
  const types = r1.output.map((i) => i.type);
  assert.equal(types.at(-1), 'message');
  // The agent's own calls ran on the server: each is an
  // agentdock:tool_call item with its output, never a function_call
  // (a call the client would have to run).
  assert.ok(!types.includes('function_call'), `no function_call items: ${types}`);
  const calls = r1.output.filter((i) => i.type === 'agentdock:tool_call');
  assert.ok(calls.some((c) => c.name === 'search'), `agentdock:tool_call items: ${types}`);
  for (const c of calls) {
    assert.equal(c.status, 'completed');
    assert.ok(typeof c.output === 'string' && c.output.length > 0, `the output of ${c.name}`);
    assert.doesNotThrow(() => JSON.parse(c.arguments));
  }
  assert.equal(r1.metadata.run, 'e2e');

  const stream = await client.responses.create({ model: agent, input: followUp, previous_response_id: r1.id, stream: true });
  const seen = [];
  let text = '';
  let final = null;
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, seen.length, 'sequence numbers count from 0 without gaps');
    seen.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed') final = ev.response;
  }
  assert.deepEqual(seen.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.equal(seen.at(-1), 'response.completed');
  assert.ok(seen.includes('response.output_item.added') && seen.includes('response.content_part.added') && seen.includes('response.output_text.done'));
  assert.equal(final.previous_response_id, r1.id);
  assert.equal(final.conversation.id, r1.conversation.id, 'the chain is one conversation');
  assert.equal(final.agentdock.orchestration.activeStep, 'FollowUp', 'the second response continues the first conversation');
  const finalText = final.output.filter((i) => i.type === 'message').map((i) => i.content.map((p) => p.text).join('')).join('');
  assert.equal(text, finalText);

  const got = await client.responses.retrieve(final.id);
  assert.deepEqual(got.output, final.output);
  assert.equal(got.status, 'completed');

  // The conversation went on: the first response is no longer its latest.
  await assert.rejects(
    client.responses.create({ model: agent, input: 'again', previous_response_id: r1.id }),
    (err) => err instanceof OpenAI.ConflictError && err.param === 'previous_response_id',
  );
  await assert.rejects(
    client.responses.create({ model: agent, input: 'hi', tools: [{ type: 'web_search' }] }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'tools[0].type',
  );
});

test('responses.stream helper assembles the final response', async () => {
  const stream = client.responses.stream({ model: agent, input: first, store: false });
  const deltas = [];
  stream.on('response.output_text.delta', (ev) => deltas.push(ev.delta));
  const final = await stream.finalResponse();
  assert.equal(final.status, 'completed');
  assert.equal(final.output_text, deltas.join(''));
  await assert.rejects(client.responses.retrieve(final.id), (err) => err instanceof OpenAI.NotFoundError, 'store: false keeps nothing');
});
