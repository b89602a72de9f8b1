// MCP's own tools against agentdock: the conformance suite's server
// scenarios that apply to a server of agents (@modelcontextprotocol/
// conformance, run with bun from npm since it needs a newer Node), for
// each protocol revision the suite has, against /mcp; and the official
// TypeScript SDK's client calling an agent over `agentdock mcp serve`
// (stdio) with progress notifications.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startServer } from '../lib/env.js';
import { binaryPath } from '../../e2e/lib/server.js';

const dir = fileURLToPath(new URL('..', import.meta.url));
const bun = `${dir}node_modules/.bin/bun`;
const suite = `${dir}node_modules/@modelcontextprotocol/conformance/dist/index.js`;

// The scenarios a server of agents can pass. The suite's others call the
// tools, resources and prompts of its own reference server by name
// (test_simple_text, ...), which this server does not have.
const scenarios = {
  '2025-06-18': ['server-initialize', 'ping', 'logging-set-level', 'tools-list', 'resources-list', 'prompts-list'],
  '2025-11-25': ['server-initialize', 'ping', 'logging-set-level', 'tools-list', 'resources-list', 'prompts-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'],
};

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

for (const [version, names] of Object.entries(scenarios)) {
  for (const name of names) {
    test(`conformance ${version} ${name}`, () => {
      // The suite requires a localhost URL for DNS rebinding.
      const url = `${server.base.replace('127.0.0.1', 'localhost')}/mcp`;
      const r = spawnSync(bun, [suite, 'server', '--url', url, '--scenario', name, '--spec-version', version], { encoding: 'utf8', timeout: 120000 });
      const out = (r.stdout + r.stderr).replace(/\x1b\[[0-9;]*m/g, '');
      assert.equal(r.status, 0, out);
      assert.match(out, /Passed: (\d+)\/\1, 0 failed/, out);
    });
  }
}

test('the TypeScript SDK client calls an agent over agentdock mcp serve (stdio)', async () => {
  const transport = new StdioClientTransport({ command: binaryPath(), args: ['mcp', 'serve'], env: { ...process.env, OFFLINE_MODEL_DELAY_MS: '1' }, stderr: 'ignore' });
  const client = new Client({ name: 'protocols-test', version: '1' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['cognitive-reasoner', 'planner', 'research-assistant']);
    const notes = [];
    const res = await client.callTool({ name: 'cognitive-reasoner', arguments: { message: 'Compare tea and coffee for a morning routine' } }, undefined, {
      onprogress: (p) => notes.push(p.message),
    });
    assert.equal(res.isError, undefined);
    assert.ok(res.content[0].text.length > 100);
    assert.equal(res.structuredContent.finishReason, 'stop');
    for (const want of ['calling search', 'calling compare', 'calling reflect']) {
      assert.ok(notes.includes(want), `progress ${JSON.stringify(notes)} lacks ${want}`);
    }
    assert.ok(notes.indexOf('calling search') < notes.indexOf('calling compare'));
    // The process is one MCP session: its calls share one conversation.
    const again = await client.callTool({ name: 'cognitive-reasoner', arguments: { message: '[offline:echo] and again' } });
    assert.equal(again.structuredContent.sessionId, res.structuredContent.sessionId);
    assert.equal(again.content[0].text, 'and again');
  } finally {
    await client.close();
  }
});
