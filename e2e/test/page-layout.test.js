// What a person sees in the first hour, at a laptop's 1280x860 and a phone's
// 390x844, in a real Chromium against the real server and the offline
// model, with nothing configured (as `make run` serves it): a suggested
// prompt of the planner brings up its approval card with the call's
// arguments; while the answer streams, Stop is on screen; once it is done,
// its Copy/Regenerate row is on screen; the suggestions are gone after the
// first message. "On screen" is asserted on element boxes against the
// viewport; the screenshots in e2e/artifacts/ are for a person to look at.
// Then: a message refused for length goes back to the composer with the
// error; the last message can be edited and resent; and a conversation made
// in one browser is listed, renamed and deleted in another with the same
// API key, and never shown to another key.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { startServer } from '../lib/server.js';
import { artifacts, idle, launch, missingChromium, pickAgent, send } from '../lib/page.js';

const skip = missingChromium() || false;
const keys = ['e2e-key-alice-0123456789', 'e2e-key-bob-0123456789'];
let server;
let keyed; // a server with API keys, for the conversation list across browsers
const browsers = [];

before(async () => {
  if (skip) return;
  // Words every 10 ms: an answer streams long enough to see Stop. No search
  // backend: the approved search reports that it is not configured.
  const noSearch = { SEARXNG_URL: undefined, TAVILY_API_KEY: undefined, BRAVE_API_KEY: undefined, SERPER_API_KEY: undefined, SEARCH_PROVIDER: undefined };
  server = await startServer({ env: { ...noSearch, OFFLINE_MODEL_DELAY_MS: '10', MAX_MESSAGE_BYTES: '400' } });
  keyed = await startServer({ env: { ...noSearch, API_KEYS: keys.join(',') } });
});

after(async () => {
  for (const b of browsers) await b.close();
  await server?.stop();
  await keyed?.stop();
});

async function newBrowser() {
  const b = await launch();
  browsers.push(b);
  return b;
}

// inView asserts that the element's box lies inside the viewport.
async function inView(page, selector, what) {
  const el = page.locator(selector).last();
  await el.waitFor({ state: 'visible' });
  const box = await el.boundingBox();
  const vp = page.viewportSize();
  assert.ok(box, `${what}: no box`);
  const inside = box.x >= 0 && box.y >= 0 && box.x + box.width <= vp.width + 0.5 && box.y + box.height <= vp.height + 0.5;
  assert.ok(inside, `${what} at ${JSON.stringify(box)} is not inside the ${vp.width}x${vp.height} viewport`);
}

// choose selects an agent, through the agents panel on a phone.
async function choose(page, id) {
  if (await page.isVisible('#agents-toggle')) await page.click('#agents-toggle');
  await pickAgent(page, id);
}

for (const viewport of [{ width: 1280, height: 860 }, { width: 390, height: 844 }]) {
  const size = `${viewport.width}x${viewport.height}`;
  test(`${size}: a suggested prompt's approval card shows the arguments; Stop and the answer's actions stay on screen; the suggestions go`, { skip }, async () => {
    const browser = await newBrowser();
    const page = await browser.open(server.base);
    await page.setViewportSize(viewport);
    await choose(page, 'planner');
    await page.click('#new-chat');
    const prompt = 'Plan a two-day offsite for twelve people';
    await inView(page, `#suggestions button[data-prompt="${prompt}"]`, 'the suggested prompt');
    await page.click(`#suggestions button[data-prompt="${prompt}"]`);

    // The planner asks before a web search, and shows what it would send.
    const card = page.locator('#log section.tool-card[data-state="approval-requested"]').last();
    await card.waitFor({ timeout: 20000 });
    await idle(page);
    assert.equal(await page.isHidden('#suggestions'), true, 'the suggestions stay after the first message');
    assert.equal(await card.getAttribute('data-tool'), 'search');
    const args = await card.locator('.approval-args').evaluate((dl) => Object.fromEntries([...dl.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
    assert.equal(args.query, prompt, `the card's arguments: ${JSON.stringify(args)}`);
    assert.equal(args.limit, '5');
    await inView(page, '#log section.tool-card[data-state="approval-requested"] button[data-action="approve"]', 'Approve');
    await inView(page, '#log section.tool-card[data-state="approval-requested"] .approval-args', "the call's arguments");
    await page.screenshot({ path: join(artifacts, `layout-approval-${size}.png`) });

    // Approved: the answer streams with Stop on screen, then ends with its
    // actions on screen.
    await card.locator('button[data-action="approve"]').click();
    await page.waitForSelector('#stop:not([hidden])');
    await page.waitForFunction(() => (document.querySelector('#log article.msg.assistant:last-of-type .answer')?.textContent ?? '').length > 20, null, { timeout: 10000 });
    await inView(page, '#stop', 'Stop while the answer streams');
    await inView(page, '#composer-input', 'the message box while the answer streams');
    await page.screenshot({ path: join(artifacts, `layout-streaming-${size}.png`) });
    await idle(page);
    await inView(page, '#log article.msg.assistant .msg-actions button[data-action="copy-answer"]', "the last answer's Copy");
    await inView(page, '#log article.msg.assistant .msg-actions button[data-action="regenerate"]', "the last answer's Regenerate");
    await inView(page, '#send', 'Send');
    await page.screenshot({ path: join(artifacts, `layout-done-${size}.png`) });
    assert.deepEqual(browser.problems, []);
  });
}

test('a message refused for length goes back to the composer with the error', { skip }, async () => {
  const browser = await newBrowser();
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  const long = `[offline:echo] ${'too long '.repeat(60)}`.trim();
  await page.fill('#composer-input', long);
  await page.press('#composer-input', 'Enter');
  await idle(page);
  assert.equal(await page.locator('#log article.msg.user').count(), 0, 'the refused message stayed as a bubble');
  assert.equal(await page.inputValue('#composer-input'), long, 'the refused message is not back in the composer');
  assert.match(await page.locator('#log article.msg.error').last().innerText(), /the limit is 400/);
  // Shortened, it goes.
  await page.fill('#composer-input', '[offline:echo] short enough');
  await page.press('#composer-input', 'Enter');
  await idle(page);
  assert.equal(await page.locator('#log article.msg.user .msg-text').last().innerText(), '[offline:echo] short enough');
  assert.deepEqual(browser.problems, []);
});

test('edit and resend: the last message and its answer are replaced, on the page and on the server', { skip }, async () => {
  const browser = await newBrowser();
  const page = await browser.open(server.base);
  await pickAgent(page, 'cognitive-reasoner');
  await page.click('#new-chat');
  await send(page, '[offline:echo] first');
  await send(page, '[offline:echo] second');
  const edits = page.locator('#log article.msg.user button[data-action="edit"]');
  assert.deepEqual(await edits.evaluateAll((bs) => bs.map((b) => b.checkVisibility())), [false, true], 'only the last message can be edited');
  await edits.last().click();
  assert.equal(await page.inputValue('#composer-input'), '[offline:echo] second');
  assert.equal(await page.isVisible('#editing'), true);
  assert.equal(await page.innerText('#send'), 'Resend');
  await page.fill('#composer-input', '[offline:echo] second, edited');
  await page.press('#composer-input', 'Enter');
  await idle(page);
  const users = await page.locator('#log article.msg.user .msg-text').allInnerTexts();
  assert.deepEqual(users, ['[offline:echo] first', '[offline:echo] second, edited']);
  const answers = await page.locator('#log article.msg.assistant .answer').allInnerTexts();
  assert.deepEqual(answers.map((a) => a.trim()), ['first', 'second, edited']);
  assert.equal(await page.isVisible('#editing'), false);
  const sid = await page.evaluate(() => sessionStorage.getItem('agentdock.session.cognitive-reasoner'));
  const view = await (await fetch(`${server.base}/api/sessions/${sid}`)).json();
  assert.deepEqual(view.messages.map((m) => m.content), ['[offline:echo] first', 'first', '[offline:echo] second, edited', 'second, edited']);
  // Escape leaves an edit without sending.
  await page.locator('#log article.msg.user button[data-action="edit"]').last().click();
  await page.press('#composer-input', 'Escape');
  assert.equal(await page.isVisible('#editing'), false);
  assert.equal(await page.inputValue('#composer-input'), '');
  await page.screenshot({ path: join(artifacts, 'edit-resend.png') });
  assert.deepEqual(browser.problems, []);
});

// signIn enters an API key in the page's key form.
async function signIn(browser, key) {
  const page = await browser.context.newPage();
  await page.goto(`${keyed.base}/`);
  await page.waitForSelector('#key-form:not([hidden])');
  await page.fill('#key-input', key);
  await page.press('#key-input', 'Enter');
  await page.waitForSelector('body[data-ready="true"]');
  return page;
}

test('a conversation made in one browser is listed in another with the same key, renamed and deleted there, and not shown to another key', { skip }, async () => {
  const a = await signIn(await newBrowser(), keys[0]);
  await pickAgent(a, 'planner');
  await send(a, '[offline:echo] the offsite, from the laptop');
  const sid = await a.evaluate(() => sessionStorage.getItem('agentdock.session.planner'));
  assert.ok(sid, 'no session');

  // Another browser (its own profile: no storage in common), the same key.
  const b = await signIn(await newBrowser(), keys[0]);
  const item = b.locator(`#conversation-list button[data-conversation="${sid}"]`);
  await item.waitFor();
  assert.equal(await item.locator('.conversation-title').innerText(), '[offline:echo] the offsite, from the laptop');
  await item.click();
  await idle(b);
  assert.equal(await b.locator('#log article.msg.user .msg-text').last().innerText(), '[offline:echo] the offsite, from the laptop');
  assert.equal((await b.locator('#log article.msg.assistant .answer').last().innerText()).trim(), 'the offsite, from the laptop');

  // Renamed in the second browser; the first sees the name once it looks again.
  await b.click(`#conversation-list button[data-conversation-action="rename"][data-id="${sid}"]`);
  await b.fill('#conversation-list .rename-input', 'Offsite plan');
  await b.press('#conversation-list .rename-input', 'Enter');
  await b.waitForFunction((id) => document.querySelector(`#conversation-list button[data-conversation="${id}"] .conversation-title`)?.textContent === 'Offsite plan', sid);
  await b.screenshot({ path: join(artifacts, 'conversations-other-browser.png') });
  await a.evaluate(() => window.dispatchEvent(new Event('focus')));
  await a.waitForFunction((id) => document.querySelector(`#conversation-list button[data-conversation="${id}"] .conversation-title`)?.textContent === 'Offsite plan', sid);

  // Another key lists nothing of it and cannot read it.
  const c = await signIn(await newBrowser(), keys[1]);
  assert.equal(await c.locator(`#conversation-list button[data-conversation="${sid}"]`).count(), 0, "another key lists the conversation");
  const other = await fetch(`${keyed.base}/api/sessions/${sid}`, { headers: { 'x-api-key': keys[1] } });
  assert.equal(other.status, 404);

  // Deleted (after a confirmation) in the second browser: gone from both lists.
  await b.click(`#conversation-list button[data-conversation-action="delete"][data-id="${sid}"]`);
  assert.equal(await b.innerText(`#conversation-list button[data-conversation-action="delete"][data-id="${sid}"]`), 'Really delete?');
  await b.click(`#conversation-list button[data-conversation-action="delete"][data-id="${sid}"]`);
  await b.waitForFunction((id) => !document.querySelector(`#conversation-list button[data-conversation="${id}"]`), sid);
  await a.evaluate(() => window.dispatchEvent(new Event('focus')));
  await a.waitForFunction((id) => !document.querySelector(`#conversation-list button[data-conversation="${id}"]`), sid);
  const gone = await fetch(`${keyed.base}/api/sessions/${sid}`, { headers: { 'x-api-key': keys[0] } });
  assert.equal(gone.status, 404);
  for (const br of browsers) assert.deepEqual(br.problems, []);
});
