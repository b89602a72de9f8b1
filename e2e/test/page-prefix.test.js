// The chat page mounted under a path prefix by a Go program of its own
// (examples/mount: its own mux, HTTP Basic sign-in, the agents under
// /agents/), in a real Chromium: the page finds the API under its own URL,
// a turn runs with the tool that reads the signed-in user from the request,
// a reload restores the conversation, and no request of the page goes
// outside /agents/. The example binary is EXAMPLE_MOUNT_BIN (make test-e2e
// builds it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startServer } from '../lib/server.js';
import { artifacts, launch, missingChromium, pickAgent, send } from '../lib/page.js';

const bin = process.env.EXAMPLE_MOUNT_BIN ? resolve(process.env.EXAMPLE_MOUNT_BIN) : '';
let missing = missingChromium();
if (!missing && !existsSync(bin)) {
  missing = `the examples/mount binary is not at EXAMPLE_MOUNT_BIN="${bin}" (make test-e2e builds it)`;
  if (process.env.CI === 'true') throw new Error(`${missing}; CI=true requires it`);
}
const skip = missing || false;
let server;
let browser;

before(async () => {
  if (skip) return;
  server = await startServer({ bin, args: ['-users', 'ada:lovelace,alan:turing'], readyPath: '/healthz' });
  browser = await launch({ httpCredentials: { username: 'ada', password: 'lovelace' } });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('the page works under /agents/ in an embedding program, behind its sign-in', { skip }, async () => {
  const requests = [];
  browser.context.on('request', (r) => requests.push(r.url()));
  const page = await browser.open(`${server.base}/agents`);
  await pickAgent(page, 'concierge');
  const answer = await send(page, 'Which user is signed in?');
  const card = answer.locator('section.tool-card[data-tool="current_user"]');
  assert.equal(await card.getAttribute('data-state'), 'output-available');
  assert.match(await answer.innerText(), /You are signed in as ada\./);
  await page.screenshot({ path: join(artifacts, 'page-under-prefix.png') });

  // A reload restores the conversation from the server, under the prefix.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector('#log article.msg.assistant section.tool-card');
  assert.equal(await page.locator('#log article.msg.user').count(), 1);
  assert.match(await page.locator('#log article.msg.assistant').last().innerText(), /signed in as ada/);

  const outside = requests.filter((u) => !u.startsWith(`${server.base}/agents/`));
  assert.deepEqual(outside, [], 'the page requested URLs outside its prefix');
  assert.ok(requests.some((u) => u.startsWith(`${server.base}/agents/api/chat/concierge`)), 'no chat request under the prefix');
  assert.deepEqual(browser.problems, []);
  await page.close();
});

test('the API under the prefix asks an unknown visitor to sign in', { skip }, async () => {
  const res = await fetch(`${server.base}/agents/api/agents`);
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Basic /);
  const ok = await fetch(`${server.base}/agents/api/agents`, { headers: { authorization: `Basic ${Buffer.from('alan:turing').toString('base64')}` } });
  assert.equal(ok.status, 200);
  assert.deepEqual((await ok.json()).agents.map((a) => a.id), ['concierge']);
});
