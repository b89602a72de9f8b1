// A deploy seen from the page: two replicas of the real server on a
// redis-server of its own (skipped without one, failed in CI) behind a load
// balancer of a few lines (a node proxy that sends every request to the
// replica in service). Replica A is SIGTERMed while it streams an answer
// and the balancer moves to B, as a rolling deploy does: A hands the turn
// over and ends its stream without finish; the page resumes by itself
// with its Last-Event-ID and gets the rest from B, which took the turn
// over (the model call under way made again, announced by a data-restart
// that the page honours). The answer shown is whole, shown once, and the
// one the session saved. First the page's stream client under node, then
// the page itself in Chromium.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer, request } from 'node:http';
import { streamTurn } from '../../web/js/api.js';
import { applyChunk, newTurn, textOf } from '../../web/js/state.js';
import { freePort, startServer } from '../lib/server.js';
import { idle, launch, missingChromium, pickAgent } from '../lib/page.js';

const noRedis = spawnSync('redis-server', ['--version']).status !== 0;
if (noRedis && process.env.CI === 'true') throw new Error('redis-server is required in CI');
const skip = noRedis ? 'redis-server not found' : false;
const skipBrowser = skip || missingChromium() || false;

async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 10000;
  while (spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() !== 'PONG') {
    if (Date.now() > deadline) { child.kill('SIGKILL'); throw new Error(`redis-server on ${port} did not answer`); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { url: `redis://127.0.0.1:${port}/0`, stop: () => new Promise((r) => { child.on('exit', r); child.kill('SIGTERM'); }) };
}

// startBalancer proxies every request, its body streamed both ways, to
// the replica in service (to(base) changes it); a replica that does not
// answer is a 502, as a balancer says.
async function startBalancer(first) {
  let upstream = new URL(first);
  const srv = createServer((req, res) => {
    const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    });
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end('{"error":{"code":"bad_gateway","message":"the replica did not answer"}}');
    });
    req.pipe(out);
  });
  const port = await freePort();
  await new Promise((r) => srv.listen(port, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${port}`,
    to(base) { upstream = new URL(base); },
    stop: () => new Promise((r) => { srv.closeAllConnections(); srv.close(r); }),
  };
}

let redis;
let replicas = [];
before(async () => {
  if (skip) return;
  redis = await startRedis();
});
after(async () => {
  for (const r of replicas) await r.stop();
  await redis?.stop();
});

// deployment starts replicas A and B (words every 20 ms) and the balancer
// on A.
async function deployment() {
  const env = { SESSION_STORE: redis.url, OFFLINE_MODEL_DELAY_MS: '20' };
  const [a, b] = await Promise.all([startServer({ env }), startServer({ env })]);
  replicas.push(a, b);
  const lb = await startBalancer(a.base);
  replicas.push(lb);
  // A deploy: A gets SIGTERM, and the balancer, seeing A's readiness
  // fail, sends the next requests to B.
  const deploy = () => {
    lb.to(b.base);
    return a.stop();
  };
  return { a, b, lb, deploy };
}

const words = Array.from({ length: 80 }, (_, i) => `w${i}`).join(' ');

async function saved(base, sid) {
  const res = await fetch(`${base}/api/sessions/${sid}`);
  assert.equal(res.status, 200);
  const view = await res.json();
  assert.equal(view.turn?.running ?? false, false, 'the turn still runs');
  return view.messages.filter((m) => m.role === 'assistant').map((m) => m.content).join('');
}

test("the page's stream client resumes on the other replica when its replica hands the turn over", { skip }, async () => {
  const { lb, deploy } = await deployment();
  const resumes = [];
  const fetchImpl = async (url, init = {}) => {
    const res = await fetch(url, init);
    if (init.method !== 'POST') resumes.push({ status: res.status, lastEventId: new Headers(init.headers).get('last-event-id') });
    return res;
  };
  const turn = newTurn();
  let deltas = 0;
  let stopped;
  const result = await streamTurn({
    base: lb.base, agentId: 'cognitive-reasoner', message: `[offline:echo] ${words}`, fetchImpl,
    signal: AbortSignal.timeout(60000),
    onChunk(chunk, id) {
      applyChunk(turn, chunk, id);
      if (chunk.type === 'text-delta' && ++deltas === 10) stopped = deploy();
    },
  });
  await stopped;
  assert.equal(result.ended, 'done', 'the stream did not reach [DONE]');
  assert.ok(resumes.length >= 1, 'the client never resumed');
  assert.equal(resumes.at(-1).status, 200);
  assert.equal(turn.finishReason, 'stop');
  assert.equal(textOf(turn), words, 'the answer shown is not the whole answer, once');
  assert.equal((await saved(lb.base, result.sessionId)).trim(), words, 'the saved answer is not the one shown');
});

test('the page resumes by itself when a deploy hands its turn over', { skip: skipBrowser }, async () => {
  const { lb, deploy } = await deployment();
  const browser = await launch();
  try {
    const page = await browser.open(lb.base);
    await pickAgent(page, 'cognitive-reasoner');
    await page.click('#new-chat');
    await page.fill('#composer-input', `[offline:echo] ${words}`);
    await page.press('#composer-input', 'Enter');
    await page.waitForFunction(() => (document.querySelector('#log article.msg.assistant:last-of-type .answer')?.textContent ?? '').split(' ').length > 10, null, { timeout: 10000 });
    await deploy();
    await idle(page, 30000);
    const shown = (await page.locator('#log article.msg.assistant').last().locator('.answer').innerText()).trim();
    assert.equal(shown, words, 'the page does not show the whole answer, once');
    const sid = await page.evaluate(() => sessionStorage.getItem('agentdock.session.cognitive-reasoner'));
    assert.equal((await saved(lb.base, sid)).trim(), words, 'the saved answer is not the one shown');
    assert.equal(await page.locator('#log .msg-error, #log .error').count(), 0, 'the page shows an error');
    assert.deepEqual(browser.problems, []);
    await page.close();
  } finally {
    await browser.close();
  }
});

// deployingAfter is a fetch that calls deploy once a POST's answer has
// streamed n text deltas.
function deployingAfter(n, deploy) {
  return async (url, init = {}) => {
    const res = await fetch(url, init);
    if (init.method !== 'POST' || !res.body) return res;
    let seen = 0;
    const decoder = new TextDecoder();
    const body = res.body.pipeThrough(new TransformStream({
      transform(chunk, c) {
        seen += decoder.decode(chunk, { stream: true }).split('"text-delta"').length - 1;
        if (seen >= n && n > 0) { n = 0; deploy(); }
        c.enqueue(chunk);
      },
    }));
    return new Response(body, { status: res.status, headers: res.headers });
  };
}

// The AI SDK's Chat (useChat's, with a plain state) over its
// DefaultChatTransport through the balancer: its stream ends without a
// finish chunk when the replica hands the turn over, and the recipe of
// docs/api.md resumes it: onFinish without a finishReason (and neither
// aborted nor failed) calls resumeStream(), which replays the turn from
// its start on the other replica.
test("the AI SDK's Chat resumes a turn handed over with resumeStream()", { skip }, async () => {
  const { AbstractChat, DefaultChatTransport } = await import('ai');
  class State {
    constructor() { this.messages = []; this.status = 'ready'; this.error = undefined; }
    pushMessage(m) { this.messages = this.messages.concat(m); }
    popMessage() { this.messages = this.messages.slice(0, -1); }
    replaceMessage(i, m) { this.messages = [...this.messages.slice(0, i), m, ...this.messages.slice(i + 1)]; }
    snapshot(v) { return structuredClone(v); }
  }
  const { lb, deploy } = await deployment();
  const errors = [];
  let resumes = 0;
  let stopped;
  let ended;
  const finished = new Promise((r) => { ended = r; });
  const id = `e2e-${crypto.randomUUID()}`;
  const chat = new (class extends AbstractChat {})({
    id,
    state: new State(),
    // The deploy comes once the POST's answer has streamed ten words.
    transport: new DefaultChatTransport({ api: `${lb.base}/api/chat/cognitive-reasoner`, fetch: deployingAfter(10, () => { stopped = deploy(); }) }),
    onError: (e) => errors.push(e),
    onFinish: ({ finishReason, isAbort, isError }) => {
      // The recipe: a stream that ended without a finish goes on
      // elsewhere (a deploy, a crash); follow it there.
      if (!finishReason && !isAbort && !isError && resumes < 5) {
        resumes++;
        chat.resumeStream();
        return;
      }
      ended(finishReason);
    },
  });
  await chat.sendMessage({ text: `[offline:echo] ${words}` });
  const reason = await Promise.race([finished, new Promise((_, fail) => setTimeout(() => fail(new Error('the chat did not finish within 60 s')), 60000).unref())]);
  await stopped;
  assert.deepEqual(errors, []);
  assert.ok(resumes > 0, 'the stream ended with a finish: nothing was handed over');
  assert.equal(reason, 'stop');
  assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant']);
  const shown = chat.messages[1].parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(shown, words, 'the message is not the whole answer, once');
  assert.equal((await saved(lb.base, id)).trim(), words);
});
