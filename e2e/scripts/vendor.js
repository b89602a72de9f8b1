// Copies the browser builds of marked and DOMPurify, with their licences, from
// node_modules into web/vendor. The page is served without a build step, so
// the vendored files are committed; this script is the one way they change,
// and test/vendor.test.js fails when they drift from package-lock.json.
import { copyFileSync, mkdirSync } from 'node:fs';
import { vendoredFiles, vendorDir } from './vendored.js';

mkdirSync(vendorDir, { recursive: true });
for (const { from, to } of vendoredFiles) {
  copyFileSync(from, to);
  console.log(`${from} -> ${to}`);
}
