// Opens the chat page in Debian's Chromium (playwright-core over CDP) with
// the launch flags browser.test.js uses, and collects what must never
// happen: page errors, failed requests, CSP violations.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const chromiumPath = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const artifacts = fileURLToPath(new URL('../artifacts/', import.meta.url));

/** missingChromium is why the browser tests skip ('' when Chromium is there); with CI=true it throws. */
export function missingChromium() {
  const missing = existsSync(chromiumPath) ? '' : `chromium not found at ${chromiumPath} (apt-get install chromium)`;
  if (missing && process.env.CI === 'true') throw new Error(`${missing}; CI=true requires it`);
  return missing;
}

/**
 * launch starts Chromium with a fresh profile (signed in with
 * httpCredentials, when given; with a viewport, a locale and a time zone
 * when given); close() removes it.
 */
export async function launch({ httpCredentials, viewport = { width: 1280, height: 900 }, locale, timezoneId } = {}) {
  mkdirSync(artifacts, { recursive: true });
  const userDataDir = mkdtempSync(join(tmpdir(), 'agentdock-e2e-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport,
    httpCredentials,
    locale,
    timezoneId,
  });
  const problems = [];
  return {
    context,
    problems,
    async close() {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
    /** open loads the page in a new tab and waits until it is ready (signed in: ready is false for the sign-in view). */
    async open(base, { ready = true, setup } = {}) {
      const page = await context.newPage();
      if (setup) await setup(page);
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (e) => {
          console.warn(`csp-violation ${JSON.stringify({ directive: e.violatedDirective, source: e.sourceFile, blocked: e.blockedURI })}`);
        });
      });
      page.on('console', (m) => {
        if (!m.text().startsWith('csp-violation ')) return;
        const v = JSON.parse(m.text().slice('csp-violation '.length));
        if (v.directive === 'script-src-attr' && v.source.endsWith('/vendor/purify.es.mjs')) return; // DOMPurify's inert parse
        problems.push(`CSP violation: ${m.text()}`);
      });
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      page.on('requestfailed', (r) => {
        // The page cancels a stream's body once [DONE] arrived, and a reload
        // cancels the conversation list's fetch in flight; Chromium reports both
        // as ERR_ABORTED. Anything else is a real failure.
        const streamDone = r.failure()?.errorText === 'net::ERR_ABORTED' && /\/api\/(chat\/|sessions\/[^/]+\/stream|sessions\?)/.test(r.url());
        if (!streamDone) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
      });
      const res = await page.goto(`${base}/`);
      assert.match(res.headers()['content-security-policy'] ?? '', /script-src 'self'/, 'the page was not served under a CSP');
      await page.waitForSelector(ready ? 'body[data-ready="true"]' : '#sign-in:not([hidden])', { timeout: 10000 });
      return page;
    },
  };
}

export async function pickAgent(page, id) {
  await page.click(`button[data-agent="${id}"]`);
  await page.waitForSelector(`button[data-agent="${id}"][aria-pressed="true"]`, { state: 'attached' });
}

/** idle waits until the selected agent's answer is complete (Stop is gone). */
export async function idle(page, timeout = 30000) {
  await page.waitForFunction(() => document.getElementById('stop').hidden
    && document.querySelectorAll('#log article.msg.assistant[aria-busy="true"]').length === 0, null, { timeout });
}

/** send types a message, sends it with Enter and waits for the answer. */
export async function send(page, text) {
  await page.fill('#composer-input', text);
  await page.press('#composer-input', 'Enter');
  await page.waitForFunction(() => !document.getElementById('stop').hidden, null, { timeout: 5000 }).catch(() => {});
  await idle(page);
  return page.locator('#log article.msg.assistant').last();
}
