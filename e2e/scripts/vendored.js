// The list of vendored files, shared by the vendor script and its drift test.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));
const modules = join(here, '..', 'node_modules');
export const vendorDir = join(here, '..', '..', 'web', 'vendor');

export const vendoredFiles = [
  ['marked/lib/marked.esm.js', 'marked.esm.js'],
  ['marked/LICENSE', 'LICENSE.marked'],
  ['dompurify/dist/purify.es.mjs', 'purify.es.mjs'],
  ['dompurify/LICENSE', 'LICENSE.dompurify'],
].map(([from, to]) => ({ from: join(modules, from), to: join(vendorDir, to) }));
