// An MCP client (the official TypeScript SDK) that calls an agent of
// agentdock as a tool over streamable HTTP, with progress notifications.
//   node mcp-client.mjs [http://localhost:8080] [agent] [message]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [base = 'http://localhost:8080', agent = 'cognitive-reasoner', message = 'Compare tea and coffee'] = process.argv.slice(2);
const client = new Client({ name: 'example', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
const { tools } = await client.listTools();
console.log(`[tools: ${tools.map((t) => t.name).join(', ')}]`);
const result = await client.callTool({ name: agent, arguments: { message } }, undefined, {
  onprogress: (p) => console.log(`[${p.message}]`),
});
console.log(result.content[0].text);
console.log(`[session ${result.structuredContent.sessionId}, finish ${result.structuredContent.finishReason}]`);
await client.close();
