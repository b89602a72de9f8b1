// The client examples of docs/a2a.md, docs/agui.md and docs/mcp-server.md
// (protocols/examples) run against agentdock serve and print what they say.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startServer } from '../lib/env.js';

const run = promisify(execFile);
const examples = fileURLToPath(new URL('../examples/', import.meta.url));
let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

test('a2a-client.mjs streams an answer', async () => {
  const { stdout } = await run('node', [`${examples}a2a-client.mjs`, server.base], { timeout: 60000 });
  assert.match(stdout, /\[calling search\]\n\[calling compare\]\n\[calling reflect\]/);
  assert.match(stdout, /\[task \w+: TASK_STATE_COMPLETED\]/);
});

test('agui-client.mjs approves the held call and finishes', async () => {
  const { stdout } = await run('node', [`${examples}agui-client.mjs`, server.base], { timeout: 60000 });
  assert.match(stdout, /\[calling search\][\s\S]*\[run finished: interrupt\]\n\[approving: The agent wants to call search/);
  assert.match(stdout, /\[run finished: success\]\n\[active step: Plan\]/);
});

test('mcp-client.mjs calls an agent with progress', async () => {
  const { stdout } = await run('node', [`${examples}mcp-client.mjs`, server.base], { timeout: 60000 });
  assert.match(stdout, /\[tools: cognitive-reasoner, planner, research-assistant, research-lead\]/);
  assert.match(stdout, /\[calling compare\]/);
  assert.match(stdout, /\[session mcp-\w+, finish stop\]/);
});
