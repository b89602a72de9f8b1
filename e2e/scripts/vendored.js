// The list of vendored files, shared by the vendor script and its drift test.
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';

const here = fileURLToPath(new URL('.', import.meta.url));
const modules = join(here, '..', 'node_modules');
export const vendorDir = join(here, '..', '..', 'web', 'vendor');

// The languages web/js/render.js registers with highlight.js.
export const highlightLanguages = ['bash', 'css', 'go', 'javascript', 'json', 'python', 'sql', 'typescript', 'xml', 'yaml'];

export const vendoredFiles = [
  ['marked/lib/marked.esm.js', 'marked.esm.js'],
  ['marked/LICENSE', 'LICENSE.marked'],
  ['dompurify/dist/purify.es.mjs', 'purify.es.mjs'],
  ['dompurify/LICENSE', 'LICENSE.dompurify'],
  // highlight.js: the core and a few common languages, as the standalone
  // ES modules of its CDN build (the highlight.js package's es/ files
  // import CommonJS), and its GitHub themes.
  ['@highlightjs/cdn-assets/es/core.min.js', 'highlight.core.min.js'],
  ...highlightLanguages.map((l) => [`@highlightjs/cdn-assets/es/languages/${l}.min.js`, `highlight.${l}.min.js`]),
  ['@highlightjs/cdn-assets/styles/github.min.css', 'highlight.github.min.css'],
  ['@highlightjs/cdn-assets/styles/github-dark.min.css', 'highlight.github-dark.min.css'],
  ['@highlightjs/cdn-assets/LICENSE', 'LICENSE.highlightjs'],
].map(([from, to]) => ({ from: join(modules, from), to: join(vendorDir, to) }));
