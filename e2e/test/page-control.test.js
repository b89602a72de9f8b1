// The chat page's controls in a real Chromium against the real server and
// the offline model: Stop (the button and Escape) mid-answer, approving and
// denying a call the planner asks about, Regenerate, Copy (answers and code
// blocks, highlighted by the vendored highlight.js), the conversation list
// after a reload and in a new tab, tool outputs folded. Screenshots go to
// e2e/artifacts/.
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
  // Words every 25 ms, so that an answer is still streaming when it is
  // stopped; no search provider, so that search asks the fake Wikipedia.
  server = await startServer({ env: { OFFLINE_MODEL_DELAY_MS: '25', SEARXNG_URL: undefined, TAVILY_API_KEY: undefined, BRAVE_API_KEY: undefined, SERPER_API_KEY: undefined, SEARCH_PROVIDER: undefined } });
  browser = await launch();
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.base });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

async function session(page, agentId) {
  const sid = await page.evaluate((a) => sessionStorage.getItem(`agentdock.session.${a}`), agentId);
  const res = await fetch(`${server.base}/api/sessions/${sid}`);
  assert.equal(res.status, 200);
  return res.json();
}

const words = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');

async function startLong(page) {
  await page.fill('#composer-input', `[offline:echo] ${words}`);
  await page.press('#composer-input', 'Enter');
  await page.waitForFunction(() => (document.querySelector('#log article.msg.assistant:last-of-type .answer')?.textContent ?? '').split(' ').length > 10, null, { timeout: 10000 });
  assert.equal(await page.isVisible('#stop'), true, 'no Stop button while the answer streams');
  await page.waitForFunction(() => !document.getElementById('stop').disabled);
}

test('Stop mid-answer, with the button and with Escape: the answer so far stays, the next message goes', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  await startLong(page);
  await page.screenshot({ path: join(artifacts, 'stop-streaming.png') });
  await page.click('#stop');
  await idle(page, 5000);
  const answer = page.locator('#log article.msg.assistant').last();
  assert.match(await answer.locator('.stopped').innerText(), /Stopped/);
  const shown = (await answer.locator('.answer').innerText()).trim();
  assert.ok(shown.length > 0 && shown.length < words.length, `the answer was not cut: ${shown.length} characters`);
  assert.equal(await page.isVisible('#stop'), false, 'Stop stays after the answer ended');
  await page.screenshot({ path: join(artifacts, 'stop-stopped.png') });
  let view = await session(page, 'cognitive-reasoner');
  assert.equal(view.turn.running, false);
  assert.ok(words.startsWith(view.messages.at(-1).content.trim()), 'the saved answer is not the start of the answer');

  // Escape stops too.
  await startLong(page);
  await page.keyboard.press('Escape');
  await idle(page, 5000);
  assert.equal(await page.locator('#log .stopped').count(), 2, 'Escape did not stop the answer');
  view = await session(page, 'cognitive-reasoner');
  assert.equal(view.turn.running, false);

  const next = await send(page, '[offline:echo] after the stops');
  assert.equal((await next.locator('.answer').innerText()).trim(), 'after the stops');
  await page.close();
});

test('approve and deny: the planner asks before a web search; the answer goes on in the same message', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'planner');
  await page.click('#new-chat');
  let answer = await send(page, 'search the web for offsite venue prices');
  let card = answer.locator('section.tool-card[data-tool="search"]');
  assert.equal(await card.getAttribute('data-state'), 'approval-requested');
  assert.equal(await card.locator('details.tool-details').evaluate((d) => d.open), false, 'the tool card is not collapsed');
  assert.equal(await card.locator('button[data-action="approve"]').isVisible(), true, 'no Approve button in view');
  assert.equal(await card.locator('button[data-action="deny"]').isVisible(), true, 'no Deny button in view');
  assert.match(await answer.locator('.msg-status').innerText(), /approval/);
  assert.equal(await answer.locator('button[data-action="regenerate"]').isVisible(), false, 'Regenerate offered while a call waits');
  let view = await session(page, 'planner');
  assert.equal(view.pendingApprovals.length, 1);
  await answer.screenshot({ path: join(artifacts, 'approval-requested.png') });

  await card.locator('button[data-action="approve"]').click();
  await idle(page);
  assert.equal(await page.locator('#log article.msg.assistant:not(.greeting)').count(), 1, 'the approved answer did not go on in the same message');
  assert.equal(await card.getAttribute('data-state'), 'output-available');
  assert.match(await card.locator('.tool-source').innerText(), /^Wikipedia · \d+ results?$/);
  assert.ok((await answer.locator('.answer').last().innerText()).trim().length > 0, 'no answer after the approval');
  view = await session(page, 'planner');
  assert.ok(view.state.recentlyUsedTools.includes('search'), 'the approved search was not recorded');
  assert.deepEqual(view.pendingApprovals, []);

  // Deny, with a reason the model hears.
  answer = await send(page, 'search the web for offsite venue prices again');
  card = answer.locator('section.tool-card[data-tool="search"]');
  assert.equal(await card.getAttribute('data-state'), 'approval-requested');
  await card.locator('.approval-reason').fill('keep the plan private');
  await card.locator('button[data-action="deny"]').click();
  await idle(page);
  assert.equal(await card.getAttribute('data-state'), 'output-denied');
  assert.match(await card.locator('.tool-notice').innerText(), /declined/);
  view = await session(page, 'planner');
  assert.equal(view.state.recentlyUsedTools.filter((t) => t === 'search').length, 1, 'the denied search was recorded');
  const denied = view.messages.filter((m) => m.role === 'tool' && m.denied);
  assert.equal(denied.length, 1);
  assert.match(denied[0].content, /keep the plan private/);
  // The offline model words the denial as the person's choice, not an error.
  const words = await answer.locator('.answer').last().innerText();
  assert.match(words, /You chose not to run this search call, so it did not run\. Your reason: keep the plan private/);
  assert.doesNotMatch(words, /error|failed/i, 'the answer calls the denial an error');
  await answer.screenshot({ path: join(artifacts, 'approval-denied.png') });

  // After a reload the denied call still shows as denied.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await idle(page);
  assert.deepEqual(await page.locator('#log section.tool-card[data-tool="search"]').evaluateAll((els) => els.map((e) => e.dataset.state)), ['output-available', 'output-denied']);
  await page.close();
});

test('a call waiting for approval survives a reload and is answered from there', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'planner');
  await page.click('#new-chat');
  await send(page, 'search the web for train times');
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await idle(page);
  const card = page.locator('#log section.tool-card[data-tool="search"]').last();
  assert.equal(await card.getAttribute('data-state'), 'approval-requested');
  await card.locator('button[data-action="approve"]').click();
  await idle(page);
  assert.equal(await card.getAttribute('data-state'), 'output-available');
  const view = await session(page, 'planner');
  assert.deepEqual(view.pendingApprovals, []);
  await page.close();
});

test('two tabs on one conversation: the second answer to a call is refused and the tab shows what the server has', { skip }, async () => {
  const a = await browser.open(server.base);
  await pickAgent(a, 'planner');
  await a.click('#new-chat');
  await send(a, 'search the web for hotel prices');
  const sid = await a.evaluate(() => sessionStorage.getItem('agentdock.session.planner'));
  const b = await browser.open(server.base);
  await b.click(`#conversation-list button[data-conversation="${sid}"]`);
  await idle(b);
  const cardB = b.locator('#log section.tool-card[data-tool="search"]').last();
  assert.equal(await cardB.getAttribute('data-state'), 'approval-requested');
  await a.locator('#log section.tool-card[data-tool="search"] button[data-action="approve"]').last().click();
  await idle(a);
  await cardB.locator('button[data-action="deny"]').click();
  await b.waitForFunction(() => [...document.querySelectorAll('#log section.tool-card[data-tool="search"]')].at(-1)?.dataset.state === 'output-available', null, { timeout: 10000 });
  await idle(b);
  assert.equal(await b.locator('#log section.tool-card[data-tool="search"]').last().getAttribute('data-state'), 'output-available', 'the tab does not show the approved call');
  await a.close();
  await b.close();
});

test('Regenerate and Copy: the last answer is replaced; answers and code blocks copy; code is highlighted', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  const source = 'Here is code:\n\n```go\nfunc main() {\n\tprintln("hi")\n}\n```\n\nThe end.';
  await send(page, `[offline:echo] ${source}`);
  // Locators resolve when used: name this answer by its position.
  const first = page.locator('#log article.msg.assistant:not(.greeting)').nth(0);
  const code = first.locator('.code-block pre code');
  assert.ok(await code.evaluate((el) => el.classList.contains('hljs')), 'the code block is not highlighted');
  assert.ok(await code.locator('span.hljs-keyword').count() > 0, 'no highlighted keyword');
  await first.screenshot({ path: join(artifacts, 'code-highlighted.png') });

  await first.locator('.code-block button[data-action="copy-code"]').click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'func main() {\n\tprintln("hi")\n}\n');
  await first.locator('button[data-action="copy-answer"]').click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), source);

  const second = await send(page, '[offline:echo] second answer');
  assert.equal(await first.locator('button[data-action="regenerate"]').isVisible(), false, 'Regenerate on an earlier answer');
  assert.equal(await second.locator('button[data-action="regenerate"]').isVisible(), true, 'no Regenerate on the last answer');
  const before = await page.locator('#log article.msg.assistant:not(.greeting)').count();
  await second.locator('button[data-action="regenerate"]').click();
  await page.waitForFunction(() => !document.getElementById('stop').hidden, null, { timeout: 5000 }).catch(() => {});
  await idle(page);
  assert.equal(await page.locator('#log article.msg.assistant:not(.greeting)').count(), before, 'Regenerate added an answer instead of replacing it');
  assert.equal(await page.locator('#log article.msg.user').count(), 2, 'Regenerate repeated the user message on the page');
  const regenerated = page.locator('#log article.msg.assistant').last();
  assert.equal((await regenerated.locator('.answer').innerText()).trim(), 'second answer');
  assert.equal(await regenerated.locator('button[data-action="regenerate"]').isVisible(), true);
  await page.close();
});

test('the conversation list: after a reload and in a new tab, a conversation reopens from the server', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  await send(page, '[offline:echo] the reasoner conversation');
  const reasonerSid = await page.evaluate(() => sessionStorage.getItem('agentdock.session.cognitive-reasoner'));
  await pickAgent(page, 'planner');
  await page.click('#new-chat');
  await send(page, '[offline:echo] the planner conversation');
  const listed = () => page.locator('#conversation-list button.conversation').evaluateAll((els) => els.map((e) => e.dataset.conversation));
  assert.ok((await listed()).includes(reasonerSid), 'the conversation is not listed');
  assert.equal(await page.locator(`#conversation-list button[data-conversation="${reasonerSid}"] .conversation-title`).innerText(), '[offline:echo] the reasoner conversation');

  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await idle(page);
  assert.ok((await listed()).includes(reasonerSid), 'the list is gone after a reload');

  // A new tab has no session of its own yet, but lists this browser's conversations.
  const tab = await browser.open(server.base);
  assert.ok((await tab.locator('#conversation-list button.conversation').evaluateAll((els) => els.map((e) => e.dataset.conversation))).includes(reasonerSid), 'the new tab does not list the conversation');
  await tab.click(`#conversation-list button[data-conversation="${reasonerSid}"]`);
  await tab.waitForSelector('button[data-agent="cognitive-reasoner"][aria-pressed="true"]', { state: 'attached' });
  await idle(tab);
  assert.equal(await tab.locator('#log article.msg.user .msg-text').last().innerText(), '[offline:echo] the reasoner conversation');
  assert.equal((await tab.locator('#log article.msg.assistant .answer').last().innerText()).trim(), 'the reasoner conversation');
  assert.equal(await tab.getAttribute(`#conversation-list button[data-conversation="${reasonerSid}"]`, 'aria-current'), 'true');
  await tab.screenshot({ path: join(artifacts, 'conversations-new-tab.png') });
  // It goes on from there.
  const next = await send(tab, '[offline:echo] continued in a new tab');
  assert.equal((await next.locator('.answer').innerText()).trim(), 'continued in a new tab');
  const view = await (await fetch(`${server.base}/api/sessions/${reasonerSid}`)).json();
  assert.equal(view.messages.filter((m) => m.role === 'user').length, 2);
  await tab.close();
  await page.close();
});

test('the composer stays usable while an answer streams: a message sent then waits, and is answered after it', { skip }, async () => {
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  await startLong(page);
  assert.equal(await page.isEnabled('#send'), true, 'Send is disabled while the answer streams');
  assert.equal(await page.innerText('#send-label'), 'Queue');
  const shownBefore = (await page.locator('#log article.msg.assistant').last().locator('.answer').innerText()).length;
  await page.fill('#composer-input', '[offline:echo] sent while streaming');
  await page.press('#composer-input', 'Enter');
  await page.waitForSelector('#log article.msg.user.queued');
  assert.equal(await page.inputValue('#composer-input'), '', 'the composer kept the queued message');
  await page.screenshot({ path: join(artifacts, 'queued-while-streaming.png') });
  // The first answer streams on, to its end, and the queued message is
  // answered after it.
  await page.waitForFunction(() => document.querySelectorAll('#log article.msg.assistant:not(.greeting)').length === 2
    && document.querySelectorAll('#log article.msg.assistant[aria-busy="true"]').length === 0
    && document.getElementById('stop').hidden, null, { timeout: 30000 });
  const answers = page.locator('#log article.msg.assistant:not(.greeting) .answer');
  const first = (await answers.nth(0).innerText()).trim();
  assert.ok(first.length > shownBefore && first === words, 'the first answer did not stream to its end');
  assert.equal((await answers.nth(1).innerText()).trim(), 'sent while streaming');
  assert.equal(await page.locator('#log article.msg.user.queued').count(), 0, 'a message stays marked as waiting');
  const view = await session(page, 'cognitive-reasoner');
  assert.deepEqual(view.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
  assert.equal(view.messages[2].content, '[offline:echo] sent while streaming');
  await page.close();
});

test('no page errors, failed requests or CSP violations', { skip }, () => {
  assert.deepEqual(browser.problems, []);
});
