// The vendored browser libraries must be the exact files of the versions
// pinned in package-lock.json, so that web/vendor/README.md tells the truth
// and an upgrade goes through scripts/vendor.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { vendoredFiles } from '../scripts/vendored.js';

test('web/vendor matches node_modules', () => {
  for (const { from, to } of vendoredFiles) {
    assert.ok(readFileSync(from).equals(readFileSync(to)), `${to} differs from ${from}: run "npm run vendor" in e2e/`);
  }
});

test('web/vendor/README.md names the installed versions', () => {
  const readme = readFileSync(new URL('../../web/vendor/README.md', import.meta.url), 'utf8');
  for (const name of ['marked', 'dompurify', '@highlightjs/cdn-assets']) {
    const { version } = JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8'));
    const escaped = name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    assert.match(readme, new RegExp(`(^|[^\\w@/-])${escaped}\\b[^\\n]*\\| ${version.replaceAll('.', '\\.')} \\|`), `README.md does not list ${name} ${version}`);
  }
});
