// MCP's own tools against agentdock: the conformance suite's server
// scenarios that apply to a server of agents (@modelcontextprotocol/
// conformance, run with bun from npm since it needs a newer Node), for
// each protocol revision (2025-06-18, 2025-11-25, 2026-07-28), against
// /mcp; and the official
// TypeScript SDK's client calling an agent over `agentdock mcp serve`
// (stdio) with progress notifications.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startServer } from '../lib/env.js';
import { binaryPath, fakeWikipedia } from '../../e2e/lib/server.js';

const dir = fileURLToPath(new URL('..', import.meta.url));
const bun = `${dir}node_modules/.bin/bun`;
const suite = `${dir}node_modules/@modelcontextprotocol/conformance/dist/index.js`;

// The scenarios a server of agents can pass, for each revision: MCP
// 2025-11-25 with sessions and 2026-07-28 stateless (the suite runs each at
// its revision's wire version), and 2025-06-18. Left out, because they need
// what only the suite's own reference server has:
// - tools-call-* (also -with-logging, -sampling, -elicitation),
//   elicitation-sep1034-defaults, elicitation-sep1330-enums,
//   json-schema-2020-12 and every input-required-result-* scenario call
//   its tools by name (test_simple_text, test_input_required_result_...);
//   an agent as a tool is called by `go test ./server/mcpserver` instead.
// - prompts-get-*, resources-read-*, resources-templates-read,
//   resources-subscribe/-unsubscribe and completion-complete read its
//   prompts, resources and completions: this server has none (its lists
//   are empty, and it offers no subscriptions or completions).
// - http-custom-header-server-validation needs a tool with x-mcp-header
//   parameters; tasks-* is the tasks extension, which is not offered;
//   server-sse-polling (pending in the suite) needs a server that closes a
//   call's stream for the client to poll.
const scenarios = {
  '2025-06-18': ['server-initialize', 'ping', 'logging-set-level', 'tools-list', 'resources-list', 'prompts-list'],
  '2025-11-25': ['server-initialize', 'server-session-lifecycle', 'ping', 'logging-set-level', 'tools-list', 'resources-list', 'prompts-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'],
  '2026-07-28': ['server-stateless', 'tools-list', 'resources-list', 'sep-2164-resource-not-found', 'prompts-list', 'server-sse-multiple-streams', 'dns-rebinding-protection', 'caching', 'http-header-validation'],
};

// The checks that cannot be exercised here, each named with its reason.
const untestable = `${dir}test/mcp-untestable.yml`;
const untestableChecks = (scenario) => readFileSync(untestable, 'utf8').split('\n').filter((l) => l.trim().startsWith(`- ${scenario}:`)).length;

// run runs a command to its end and returns its exit status and output. It
// is asynchronous so that the event loop goes on reading the server's
// output meanwhile: a server whose output pipe fills stops answering.
function run(cmd, args, timeoutMs) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => { output += d; });
    child.stderr.on('data', (d) => { output += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (status) => { clearTimeout(timer); resolve({ status, output }); });
  });
}

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

for (const [version, names] of Object.entries(scenarios)) {
  for (const name of names) {
    test(`conformance ${version} ${name}`, async () => {
      // The suite requires a localhost URL for DNS rebinding.
      const url = `${server.base.replace('127.0.0.1', 'localhost')}/mcp`;
      const r = await run(bun, [suite, 'server', '--url', url, '--scenario', name, '--spec-version', version, '--expected-failures', untestable], 120000);
      const out = r.output.replace(/\x1b\[[0-9;]*m/g, '');
      assert.equal(r.status, 0, out);
      // Every check passed but the untestable ones, and no check warned.
      const [, passed, total, failed, warnings] = out.match(/Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/) ?? [];
      assert.ok(Number(total) > 0, out);
      assert.equal(Number(failed), untestableChecks(name), out);
      assert.equal(Number(passed) + Number(failed), Number(total), out);
      assert.equal(Number(warnings), 0, out);
    });
  }
}

test('the TypeScript SDK client calls an agent over agentdock mcp serve (stdio)', async () => {
  // Search asks the fake Wikipedia, as the servers of startServer do.
  const env = { ...process.env, OFFLINE_MODEL_DELAY_MS: '1', WIKIPEDIA_URL: (await fakeWikipedia()).url };
  const transport = new StdioClientTransport({ command: binaryPath(), args: ['mcp', 'serve'], env, stderr: 'ignore' });
  const client = new Client({ name: 'protocols-test', version: '1' });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['cognitive-reasoner', 'planner', 'research-assistant', 'research-lead']);
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
