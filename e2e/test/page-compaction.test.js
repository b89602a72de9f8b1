// The page shows when a conversation was compacted: in a real Chromium
// against the real server, whose context budget is set so small that the
// second turn summarizes the first (with the offline summarizer), the
// answer carries a "Conversation compacted" line that unfolds to the
// summary, every turn stays on the page in full, and the line is still
// there after a reload, rebuilt from the session's history. A screenshot
// goes to e2e/artifacts/.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startServer } from '../lib/server.js';
import { artifacts, idle, launch, missingChromium, pickAgent, send } from '../lib/page.js';

const skip = missingChromium() || false;
let server;
let browser;

before(async () => {
  if (skip) return;
  // The planner's tools and prompt take about 1,800 tokens: two turns of
  // a few hundred words each pass 2,500.
  server = await startServer({ env: { CONTEXT_MAX_INPUT_TOKENS: '2500', CONTEXT_KEEP_TURNS: '1', CONTEXT_SUMMARIZER: 'offline' } });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

test('a compacted conversation says so where it happened, and after a reload', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'planner');
  await page.click('#new-chat');
  const filler = Array.from({ length: 120 }, (_, i) => `detail${i}`).join(' ');
  await send(page, `[offline:echo] The harbour master is Ines; the ferry leaves at nine. ${filler}`);
  const second = await send(page, `[offline:echo] And the return trip is at six. ${filler}`);
  const line = second.locator('details.compaction summary');
  await line.waitFor({ timeout: 10000 });
  assert.match(await line.innerText(), /Conversation compacted: Turn 1 summarized for the model \(.* input tokens\)/);
  await line.click();
  assert.match(await second.locator('.compaction-summary').innerText(), /The harbour master is Ines; the ferry leaves at nine\./);
  // Nothing left the page: both turns are there in full.
  assert.equal(await page.locator('#log article.msg.user').count(), 2);
  await page.screenshot({ path: join(artifacts, 'compaction.png') });

  await page.reload();
  await idle(page);
  const restored = page.locator('#log details.compaction summary');
  await restored.waitFor({ timeout: 10000 });
  assert.match(await restored.innerText(), /Conversation compacted: Turn 1 summarized for the model/);
  assert.equal(await page.locator('#log article.msg.user').count(), 2);
});
