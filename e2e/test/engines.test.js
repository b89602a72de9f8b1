// The README's Node.js version is one every package the tests install
// supports: each package's declared engines.node (in the lockfiles of e2e/,
// protocols/, conformance/ and the MCP test servers) accepts it, and the
// projects' own package.json ask for it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const projects = ['e2e', 'protocols', 'conformance', 'tools/mcp/testdata/servers'];

// accepts reports whether an engines range accepts major.0.0, for the forms
// packages use: "X", ">=X", ">= X.Y.Z", "^X.Y", joined by "||".
export function accepts(range, major) {
  return range.split('||').some((alt) => {
    const m = /^\s*(>=|\^)?\s*v?(\d+)(?:\.\d+)?(?:\.\d+)?\s*$/.exec(alt);
    if (!m) throw new Error(`engines range ${JSON.stringify(range)}: form not understood`);
    const want = Number(m[2]);
    return m[1] === '>=' ? major >= want : major === want;
  });
}

test('the README\'s Node.js version is supported by every package the tests install', (t) => {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const m = /Node\.js (\d+) or later/.exec(readme);
  assert.ok(m, 'the README names no Node.js version');
  const major = Number(m[1]);
  const refusing = [];
  for (const dir of projects) {
    const lock = JSON.parse(readFileSync(`${root}${dir}/package-lock.json`, 'utf8'));
    for (const [name, pkg] of Object.entries(lock.packages ?? {})) {
      const range = pkg.engines?.node;
      if (range && !accepts(range, major)) refusing.push(`${dir}: ${name || '(root)'} ${pkg.version ?? ''} wants node ${range}`);
    }
    const own = JSON.parse(readFileSync(`${root}${dir}/package.json`, 'utf8')).engines?.node;
    if (own && !accepts(own, major)) refusing.push(`${dir}/package.json wants node ${own}`);
  }
  assert.deepEqual(refusing, [], `packages that do not support the README's Node.js ${major}`);
  const here = Number(process.versions.node.split('.')[0]);
  if (here < major) t.diagnostic(`node ${process.versions.node} here is older than the README's ${major}: the tests may run, unsupported`);
});

test('engines ranges are read as npm reads them', () => {
  assert.equal(accepts('>=22', 22), true);
  assert.equal(accepts('>=22.0.0', 20), false);
  assert.equal(accepts('18 || 20 || >=22', 22), true);
  assert.equal(accepts('20 || >=22', 21), false);
  assert.equal(accepts('>= 20', 22), true);
});
