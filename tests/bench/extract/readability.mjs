// Readability.js (@mozilla/readability, pinned in package-lock.json) on jsdom, timed per page in
// process: the DOM parse and Readability's parse() together; the score is on textContent.
// Usage: node readability.mjs PAGES.tsv OUT.jsonl   (NODE_PATH: the pinned node_modules)
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.env.EXTRACT_NODE_MODULES, 'x.js'));
const { Readability } = require('@mozilla/readability');
const { JSDOM, VirtualConsole } = require('jsdom');

const [pagesFile, outFile] = process.argv.slice(2);
const lines = fs.readFileSync(pagesFile, 'utf8').split('\n').filter(Boolean);
const out = fs.openSync(outFile, 'w');
const quiet = new VirtualConsole(); // CSS and script errors of the pages stay silent
for (const line of lines) {
  const [dataset, file] = line.split('\t');
  const html = fs.readFileSync(file, 'utf8');
  let text = '';
  let error = null;
  const t0 = process.hrtime.bigint();
  try {
    const dom = new JSDOM(html, { url: 'http://127.0.0.1/', virtualConsole: quiet });
    const article = new Readability(dom.window.document).parse();
    text = (article && article.textContent) || '';
    dom.window.close();
  } catch (e) {
    error = e && e.name ? e.name : 'error';
  }
  const micros = Number((process.hrtime.bigint() - t0) / 1000n);
  fs.writeSync(out, JSON.stringify({ dataset, file: path.basename(file), text, micros, error }) + '\n');
}
fs.closeSync(out);
