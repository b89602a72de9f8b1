// AG-UI's own client (@ag-ui/client HttpAgent, whose run pipeline checks
// every event's schema and verifies the event sequence) against agentdock
// serve: a run with tool calls and the orchestration as shared state, then
// a run that ends on an approval interrupt and the run that resumes it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { from, lastValueFrom, toArray } from 'rxjs';
import { HttpAgent, verifyEvents } from '@ag-ui/client';
import { startServer } from '../lib/env.js';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

/** run runs the agent once and returns every event it saw and the run's result. */
async function run(agent, params = {}) {
  const events = [];
  const out = await agent.runAgent({ runId: randomUUID(), ...params }, { onEvent: ({ event }) => { events.push(event); } });
  // The run's pipeline verified them as they came; verify the whole run
  // again as one sequence, the way a recorded run is checked.
  await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  return { events, ...out };
}

const types = (events) => events.map((e) => e.type);

test('a run with tool calls: text, tool calls and results, steps, and the orchestration as state', async () => {
  const agent = new HttpAgent({ url: `${server.base}/api/agui/cognitive-reasoner`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: randomUUID(), role: 'user', content: 'Compare tea and coffee for a morning routine' });
  const { events } = await run(agent);
  const ty = types(events);
  assert.equal(ty[0], 'RUN_STARTED');
  assert.equal(ty.at(-1), 'RUN_FINISHED');
  assert.deepEqual(events.filter((e) => e.type === 'TOOL_CALL_START').map((e) => e.toolCallName), ['search', 'compare', 'reflect']);
  assert.equal(events.filter((e) => e.type === 'TOOL_CALL_RESULT').length, 3);
  assert.ok(ty.includes('TEXT_MESSAGE_CONTENT'));
  assert.equal(ty.filter((t) => t === 'STEP_STARTED').length, ty.filter((t) => t === 'STEP_FINISHED').length);
  assert.equal(agent.state.orchestration.activeStep, 'ComparisonMode');
  assert.ok(Array.isArray(agent.state.orchestration.offeredTools));
  const assistant = agent.messages.filter((m) => m.role === 'assistant');
  assert.ok(assistant.some((m) => (m.toolCalls ?? []).some((c) => c.function.name === 'compare')));
  assert.ok(assistant.some((m) => typeof m.content === 'string' && m.content.length > 0));
});

test('human in the loop: an approval ends the run with an interrupt, and the resumed run carries it out', async () => {
  const agent = new HttpAgent({ url: `${server.base}/api/agui/planner`, threadId: `thread-${randomUUID()}` });
  agent.addMessage({ id: randomUUID(), role: 'user', content: 'search the web for offsite venue prices' });
  const first = await run(agent);
  const end = first.events.at(-1);
  assert.equal(end.type, 'RUN_FINISHED');
  assert.equal(end.outcome.type, 'interrupt');
  assert.equal(end.outcome.interrupts.length, 1);
  const interrupt = end.outcome.interrupts[0];
  const call = first.events.find((e) => e.type === 'TOOL_CALL_START' && e.toolCallId === interrupt.toolCallId);
  assert.equal(call?.toolCallName, 'search');
  assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), [interrupt.id]);

  // The client refuses a run that leaves the interrupt unanswered.
  await assert.rejects(run(agent), /pending interrupt/);

  const second = await run(agent, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
  const result = second.events.find((e) => e.type === 'TOOL_CALL_RESULT' && e.toolCallId === interrupt.toolCallId);
  assert.match(result.content, /^## Search results from Wikipedia: /, 'the approved search ran (on the fake Wikipedia)');
  assert.equal(second.events.at(-1).type, 'RUN_FINISHED');
  assert.equal(second.events.at(-1).outcome.type, 'success');
  assert.deepEqual(agent.pendingInterrupts, []);

  const session = await (await fetch(`${server.base}/api/sessions/${agent.threadId}`)).json();
  assert.deepEqual(session.pendingApprovals, []);
  assert.ok(session.state.recentlyUsedTools.includes('search'));
});

test('API keys: a thread is the key\'s session; another key cannot resume it', async (t) => {
  const keyed = await startServer({ env: { API_KEYS: 'key-one,key-two' } });
  t.after(() => keyed.stop());
  const threadId = `thread-${randomUUID()}`;
  const mine = new HttpAgent({ url: `${keyed.base}/api/agui/planner`, threadId, headers: { 'x-api-key': 'key-one' } });
  mine.addMessage({ id: randomUUID(), role: 'user', content: 'search the web for offsite venue prices' });
  const { events } = await run(mine);
  const interrupt = events.at(-1).outcome.interrupts[0];
  const res = await fetch(`${keyed.base}/api/agui/planner`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'key-two' },
    body: JSON.stringify({ threadId, runId: 'r2', messages: [], tools: [], context: [], resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] }),
  });
  assert.equal(res.status, 404);
  assert.equal((await res.json()).error.code, 'session_not_found');
});
