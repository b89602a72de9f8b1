// A scripted OpenAI-compatible model server over real HTTP, for tests that
// run `agentdock serve` with LLM_PROVIDER=openai and LLM_BASE_URL at it:
// POST /v1/chat/completions answers, streamed or not, with the next queued
// script, or else by a rule of the request (a call of the first tool it
// may call when the user asks for weather or tool_choice requires a call,
// else a short text). It keeps every request it received, so that a test
// can assert what the runtime sent the model.
import { createServer } from 'node:http';

/**
 * startMockModel starts the server on a free loopback port.
 * A script is {text} or {toolCalls: [{name, arguments}]} (arguments an
 * object), or a function of the request returning one.
 */
export async function startMockModel() {
  const queue = [];
  const requests = [];
  let seq = 0;
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST' || !req.url.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${req.url}`, type: 'invalid_request_error' } }));
      return;
    }
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw);
    requests.push(body);
    let script = queue.length > 0 ? queue.shift() : defaultScript;
    if (typeof script === 'function') script = script(body);
    const id = `chatcmpl-mock-${++seq}`;
    const calls = (script.toolCalls ?? []).map((c, i) => ({
      index: i, id: c.id ?? `call_${seq}_${i}`, type: 'function',
      function: { name: c.name, arguments: JSON.stringify(c.arguments ?? {}) },
    }));
    const text = script.text ?? '';
    const finish = calls.length > 0 ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: Math.ceil(raw.length / 4), completion_tokens: Math.ceil(text.length / 4) + calls.length, total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        id, object: 'chat.completion', created: 0, model: body.model,
        choices: [{ index: 0, finish_reason: finish, message: { role: 'assistant', content: text || null, tool_calls: calls.length ? calls : undefined } }],
        usage,
      }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (delta, finishReason = null) => res.write(`data: ${JSON.stringify({
      id, object: 'chat.completion.chunk', created: 0, model: body.model, choices: [{ index: 0, delta, finish_reason: finishReason }],
    })}\n\n`);
    send({ role: 'assistant', content: '' });
    for (const word of text.match(/\S+\s*/g) ?? []) send({ content: word });
    for (const c of calls) send({ tool_calls: [c] });
    send({}, finish);
    if (body.stream_options?.include_usage) {
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: body.model, choices: [], usage })}\n\n`);
    }
    res.end('data: [DONE]\n\n');
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    enqueue: (...scripts) => queue.push(...scripts),
    pending: () => queue.length,
    close: () => new Promise((ok) => server.close(ok)),
  };
}

/** callable names the tools a request lets the model call now. */
export function callable(body) {
  const tools = (body.tools ?? []).map((t) => t.function.name);
  const choice = body.tool_choice;
  if (choice === 'none') return [];
  if (choice?.type === 'allowed_tools') return choice.allowed_tools.tools.map((t) => t.function.name);
  if (choice?.type === 'function') return [choice.function.name];
  return tools;
}

/** lastUserText is the text of the request's last user message. */
export function lastUserText(body) {
  const last = [...body.messages].reverse().find((m) => m.role === 'user');
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return last.content.filter((p) => p.type === 'text').map((p) => p.text).join('\n');
}

// defaultScript answers a request by its content: a call of the first
// tool it may call, with arguments its schema requires, when the
// conversation ends with the user asking about weather or tool_choice
// requires a call; otherwise a short text.
function defaultScript(body) {
  const last = body.messages[body.messages.length - 1];
  const tools = callable(body);
  const required = body.tool_choice === 'required' || body.tool_choice?.type === 'function' || body.tool_choice?.allowed_tools?.mode === 'required';
  if (tools.length > 0 && last.role === 'user' && (required || /weather/i.test(lastUserText(body)))) {
    const spec = body.tools.find((t) => t.function.name === tools[0]).function;
    const args = {};
    for (const name of spec.parameters?.required ?? []) args[name] = 'San Francisco, CA';
    return { toolCalls: [{ name: tools[0], arguments: args }] };
  }
  return { text: 'Hello there, friend.' };
}
