// The official A2A JS client (@a2a-js/sdk, protocol v1.0) against agentdock
// serve: send, stream, get, an approval as input-required, and, with two
// replicas on one redis-server, a resubscription and a cancel sent to the
// replica that does not run the task. API keys keep each key's tasks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { TaskNotFoundError, TaskNotCancelableError } from '@a2a-js/sdk/errors';
import { startServer, startRedis, hasRedis, missing } from '../lib/env.js';

const msg = (text, extra = {}) => ({ messageId: randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }], ...extra });
const answerOf = (task) => task.artifacts.flatMap((a) => a.parts).map((p) => p.content?.value ?? '').join('');

/** client connects to an agent's card; key, when set, is sent with every request. */
function client(base, agent, { key, transport } = {}) {
  const fetchImpl = key ? (url, init = {}) => fetch(url, { ...init, headers: { ...init.headers, 'x-api-key': key } }) : undefined;
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    ...(transport && { preferredTransports: [transport] }),
  });
  const factory = new ClientFactory(options);
  if (!fetchImpl) return factory.createFromUrl(`${base}/a2a/${agent}/`);
  return fetch(`${base}/a2a/${agent}/.well-known/agent-card.json`, { headers: { 'x-api-key': key } })
    .then((r) => r.json()).then((card) => factory.createFromAgentCard(card));
}

async function collect(stream) {
  const out = [];
  for await (const ev of stream) out.push(ev.payload);
  return out;
}

let one;
before(async () => { one = await startServer(); });
after(async () => { await one?.stop(); });

for (const transport of ['JSONRPC', 'HTTP+JSON']) {
  test(`${transport}: send, get and stream a task`, async () => {
    const c = await client(one.base, 'cognitive-reasoner', { transport });
    const task = await c.sendMessage({ message: msg('[offline:echo] hello from A2A') });
    assert.equal(task.status.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(answerOf(task), 'hello from A2A');
    const got = await c.getTask({ id: task.id });
    assert.equal(got.contextId, task.contextId);
    assert.equal(answerOf(got), 'hello from A2A');

    const events = await collect(c.sendMessageStream({ message: msg('Compare tea and coffee for a morning routine', { contextId: task.contextId }) }));
    assert.equal(events[0].$case, 'task');
    assert.equal(events[0].value.status.state, TaskState.TASK_STATE_WORKING);
    assert.equal(events[0].value.contextId, task.contextId);
    const last = events.at(-1);
    assert.equal(last.$case, 'statusUpdate');
    assert.equal(last.value.status.state, TaskState.TASK_STATE_COMPLETED);
    // The step's sequence: its tool calls, in order, as data parts.
    const calls = events.filter((e) => e.$case === 'statusUpdate' && e.value.status.message)
      .flatMap((e) => e.value.status.message.parts).map((p) => p.content?.value?.toolCall?.name).filter(Boolean);
    assert.deepEqual(calls, ['search', 'compare', 'reflect']);
    const chunks = events.filter((e) => e.$case === 'artifactUpdate');
    assert.ok(chunks.length > 10);
    assert.equal(chunks[0].value.append, false);
    assert.equal(chunks.at(-1).value.lastChunk, true);
    const streamed = chunks.map((e) => e.value.artifact.parts[0].content.value).join('');
    const stored = await c.getTask({ id: events[0].value.id });
    assert.equal(answerOf(stored), streamed);
  });
}

test('a held approval is input-required, and a data part answers it', async () => {
  const c = await client(one.base, 'planner');
  const task = await c.sendMessage({ message: msg('search the web for offsite venue prices') });
  assert.equal(task.status.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const data = task.status.message.parts.map((p) => p.content).find((p) => p.$case === 'data').value;
  assert.equal(data.approvals.length, 1);
  assert.equal(data.approvals[0].toolName, 'search');
  const answer = msg('', { taskId: task.id, contextId: task.contextId });
  answer.parts = [{ content: { $case: 'data', value: { approvals: [{ id: data.approvals[0].id, approved: true }] } } }];
  const done = await c.sendMessage({ message: answer });
  assert.equal(done.id, task.id);
  assert.equal(done.status.state, TaskState.TASK_STATE_COMPLETED);
  assert.ok(answerOf(done).length > 0);
  await assert.rejects(c.cancelTask({ id: task.id }), TaskNotCancelableError);
});

test('two replicas on one redis-server: resubscribe and cancel on the replica that does not run the task', async (t) => {
  if (!hasRedis()) return missing(t, 'redis-server');
  const redis = await startRedis();
  t.after(() => redis.stop());
  const env = { SESSION_STORE: redis.url, OFFLINE_MODEL_DELAY_MS: '25' };
  const [a, b] = await Promise.all([startServer({ env }), startServer({ env })]);
  t.after(() => Promise.all([a.stop(), b.stop()]));
  const onA = await client(a.base, 'cognitive-reasoner');
  const onB = await client(b.base, 'cognitive-reasoner');

  const stream = onA.sendMessageStream({ message: msg('Compare tea and coffee for a long afternoon') })[Symbol.asyncIterator]();
  const first = (await stream.next()).value.payload;
  assert.equal(first.$case, 'task');
  const id = first.value.id;
  // Wait for the answer to start on A.
  for (;;) {
    const { value, done } = await stream.next();
    assert.ok(!done, 'the stream ended before its answer');
    if (value.payload.$case === 'artifactUpdate') break;
  }
  // B reads the task (it runs on A) from the shared store and log.
  const seen = await onB.getTask({ id });
  assert.equal(seen.status.state, TaskState.TASK_STATE_WORKING);
  const resub = collect(onB.resubscribeTask({ id }));
  await new Promise((r) => setTimeout(r, 300));
  const canceled = await onB.cancelTask({ id });
  assert.equal(canceled.status.state, TaskState.TASK_STATE_CANCELED);

  const rest = [];
  for (let r = await stream.next(); !r.done; r = await stream.next()) rest.push(r.value.payload);
  assert.equal(rest.at(-1).$case, 'statusUpdate');
  assert.equal(rest.at(-1).value.status.state, TaskState.TASK_STATE_CANCELED);
  const fromB = await resub;
  assert.equal(fromB[0].$case, 'task');
  assert.ok(fromB.some((e) => e.$case === 'artifactUpdate'), 'the resubscription got none of the answer');
  assert.equal(fromB.at(-1).value.status.state, TaskState.TASK_STATE_CANCELED);
  assert.equal((await onA.getTask({ id })).status.state, TaskState.TASK_STATE_CANCELED);
});

test('API keys: another key\'s task is not found', async (t) => {
  const keyed = await startServer({ env: { API_KEYS: 'key-one,key-two' } });
  t.after(() => keyed.stop());
  const mine = await client(keyed.base, 'cognitive-reasoner', { key: 'key-one' });
  const theirs = await client(keyed.base, 'cognitive-reasoner', { key: 'key-two' });
  const task = await mine.sendMessage({ message: msg('[offline:echo] private') });
  assert.equal(answerOf(await mine.getTask({ id: task.id })), 'private');
  await assert.rejects(theirs.getTask({ id: task.id }), TaskNotFoundError);
  await assert.rejects(theirs.cancelTask({ id: task.id }), TaskNotFoundError);
  const rest = await client(keyed.base, 'cognitive-reasoner', { key: 'key-two', transport: 'HTTP+JSON' });
  await assert.rejects(rest.getTask({ id: task.id }), TaskNotFoundError);
  const anon = await fetch(`${keyed.base}/a2a/cognitive-reasoner/.well-known/agent-card.json`);
  assert.equal(anon.status, 401);
});
