// The Open Responses compliance suite (the /v1/responses spec's own tests,
// ../shared/conformance/openresponses, unchanged) against agentdock serve
// on a scripted OpenAI-compatible model, run by bun as its README says.
// It prints the counts; every one of the 17 tests must pass.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../../e2e/lib/server.js';
import { startMockModel } from '../../e2e/lib/mockmodel.js';

const here = fileURLToPath(new URL('..', import.meta.url));
const suite = resolve(here, '../../shared/conformance/openresponses');

function run(cmd, args, opts) {
  return new Promise((ok, fail) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', fail);
    child.on('exit', (code) => ok({ code, out, err }));
  });
}

test('Open Responses compliance suite: 17 of 17 pass', { timeout: 240_000 }, async (t) => {
  if (!existsSync(suite)) {
    if (process.env.CI === 'true') assert.fail(`the suite is not at ${suite}: ../shared is required in CI`);
    t.skip(`the suite is not at ${suite} (../shared is not beside the project)`);
    return;
  }
  const model = await startMockModel();
  const server = await startServer({
    env: {
      LLM_PROVIDER: 'openai', LLM_BASE_URL: model.url, LLM_MODEL: 'scripted', OPENAI_API_KEY: undefined,
      TEMPLATES_DIR: join(here, 'templates'), LOG_LEVEL: 'warn',
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'openresponses-'));
  try {
    cpSync(suite, join(dir, 'or'), { recursive: true });
    symlinkSync(join(here, 'node_modules'), join(dir, 'or', 'node_modules'), 'dir');
    const bun = join(here, 'node_modules', '.bin', 'bun');
    const { code, out, err } = await run(bun, ['run', 'test:compliance', '--base-url', `${server.base}/v1`, '--api-key', 'test', '--model', 'conformance', '--json'], { cwd: join(dir, 'or') });
    let report;
    try {
      report = JSON.parse(out);
    } catch {
      assert.fail(`the suite printed no report (exit ${code}):\n${out}\n${err}\nserver:\n${server.output()}`);
    }
    const { passed, failed, skipped, total } = report.summary;
    console.log(`Open Responses compliance: ${passed} of ${total} passed, ${failed} failed, ${skipped} skipped`);
    for (const r of report.results) {
      console.log(`  ${r.status === 'passed' ? 'ok ' : 'NOT'} ${r.id}${r.errors?.length ? `: ${r.errors.join('; ').slice(0, 600)}` : ''}`);
      if (r.status === 'failed') console.log(`      response: ${JSON.stringify(r.response ?? null).slice(0, 1500)}`);
    }
    assert.equal(total, 17, 'the suite has 17 tests');
    assert.equal(passed, 17, `${failed} failed, ${skipped} skipped`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await server.stop();
    await model.close();
  }
});
