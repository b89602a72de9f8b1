// A hostile MCP server over stdio, for the tests of the runtime's limits.
// It speaks just enough of MCP (newline-delimited JSON-RPC: initialize,
// tools/list, tools/call, ping) and misbehaves as its first argument says:
//
//   big-result [BYTES]  tool "big" answers BYTES of text (default 15 MB),
//                       "image" an image of BYTES, "fail" an error naming
//                       absolute paths
//   endless-list        tools/list pages forever, a new cursor every page
//   loop-list           tools/list gives the same cursor forever
//   many-tools N        tools/list gives N tools on one page
//   big-schema          one tool with a 10 MB inputSchema, ten tools of
//                       40 KB each, and a small one
//   setsid MARKER       starts a grandchild in a session of its own
//                       (setsid) that runs until killed, and serves "ping"
//
// Nothing but node is needed: no npm package.
'use strict';
const readline = require('readline');
const { spawn } = require('child_process');

const mode = process.argv[2] || 'big-result';
const arg = process.argv[3];

function send(msg) { process.stdout.write(JSON.stringify(msg) + '\n'); }

function tool(name, schema, description) {
  return { name, description: description || 'The ' + name + ' tool.', inputSchema: schema || { type: 'object', properties: {} } };
}

function bigSchema(bytes) {
  // An object schema whose properties' descriptions add up to bytes.
  const props = {};
  const each = 1000;
  for (let i = 0; i * each < bytes; i++) props['p' + i] = { type: 'string', description: 'x'.repeat(each) };
  return { type: 'object', properties: props };
}

let page = 0;
function listTools(params) {
  switch (mode) {
    case 'endless-list': {
      page++;
      const tools = [];
      for (let i = 0; i < 50; i++) tools.push(tool('t' + page + '_' + i));
      return { tools, nextCursor: 'page-' + page };
    }
    case 'loop-list':
      return { tools: [tool('looped')], nextCursor: 'same' };
    case 'many-tools': {
      const tools = [];
      for (let i = 0; i < Number(arg); i++) tools.push(tool('t' + i));
      return { tools };
    }
    case 'big-schema': {
      const tools = [tool('huge', bigSchema(10 << 20))];
      for (let i = 0; i < 10; i++) tools.push(tool('medium' + i, bigSchema(40000)));
      tools.push(tool('small'));
      return { tools };
    }
    case 'setsid':
      return { tools: [tool('ping')] };
    default:
      return { tools: [tool('big'), tool('image'), tool('fail')] };
  }
}

function callTool(params) {
  const size = Number(arg || 15000000);
  switch (params.name) {
    case 'big':
      return { content: [{ type: 'text', text: 'B'.repeat(size) }] };
    case 'image':
      return { content: [{ type: 'image', mimeType: 'image/png', data: Buffer.alloc(size * 3 / 4, 7).toString('base64') }] };
    case 'fail':
      return { isError: true, content: [{ type: 'text', text: 'cannot open ' + __dirname + '/secret/data.json: denied' }] };
    default:
      return { content: [{ type: 'text', text: 'pong' }] };
  }
}

if (mode === 'setsid') {
  // detached: the child calls setsid(), leaving this process group.
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000) // hostile-daemon', arg || 'marker'], { detached: true, stdio: 'ignore' });
  child.unref();
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined) return; // a notification
  switch (msg.method) {
    case 'initialize':
      send({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1' } } });
      break;
    case 'ping':
      send({ jsonrpc: '2.0', id: msg.id, result: {} });
      break;
    case 'tools/list':
      send({ jsonrpc: '2.0', id: msg.id, result: listTools(msg.params || {}) });
      break;
    case 'tools/call':
      send({ jsonrpc: '2.0', id: msg.id, result: callTool(msg.params || {}) });
      break;
    default:
      send({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found: ' + msg.method } });
  }
});
rl.on('close', () => process.exit(0));
