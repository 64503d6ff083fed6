// README.md as Artifact Hub and GitHub show it: rendered by markdown-it as CommonMark with
// GitHub's tables, strikethrough and autolinks (the GFM extensions both sites turn on), raw
// HTML allowed as both allow it, then opened in Debian's Chromium, headless, driven by
// playwright-core (which brings no browser of its own). The page must show no Markdown left
// raw: no table row left as a paragraph of `|` cells, no `**`, no backtick of an unclosed code
// span, no link syntax, no code fence left open (the rest of the page would be code). The same
// checks run on docs/*.md, which GitHub renders. A screenshot of the README goes to
// target/readme-render/README.png. A missing Chromium fails the test.
//
// CHROMIUM overrides the browser path (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir, mkdir, access } from 'node:fs/promises';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import markdownit from 'markdown-it';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const artifacts = join(root, 'target', 'readme-render');
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

const md = markdownit('commonmark', { html: true, linkify: true })
  .enable(['table', 'strikethrough', 'linkify']);

// A page laid out like the README column of Artifact Hub and GitHub: GitHub's table and
// code styles in spirit, no fonts or styles from the network (the machine has none).
const style = `
  body { font: 16px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
         color: #1f2328; max-width: 980px; margin: 24px auto; padding: 0 32px; }
  h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
  code, pre { font: 85% ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
              background: #f6f8fa; border-radius: 6px; }
  code { padding: .2em .4em; }
  pre { padding: 16px; overflow: auto; line-height: 1.45; }
  pre code { padding: 0; background: none; }
  table { border-collapse: collapse; display: block; overflow: auto; margin: 16px 0; }
  th, td { border: 1px solid #d1d9e0; padding: 6px 13px; vertical-align: top; }
  tr:nth-child(2n) { background: #f6f8fa; }
`;

/** Fences opened and not closed, by CommonMark's rules; markdown-it closes them at the end. */
function unclosedFences(text) {
  let open = null;
  text.split('\n').forEach((line, i) => {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (!m) return;
    const run = m[1];
    if (!open) {
      open = { char: run[0], len: run.length, line: i + 1 };
    } else if (run[0] === open.char && run.length >= open.len && line.trim() === run[0].repeat(line.trim().length)) {
      open = null;
    }
  });
  return open ? [`line ${open.line}: a code fence opened here is never closed`] : [];
}

/** What a reader would see as raw Markdown on the rendered page, found in the browser. */
function rawMarkdownOnPage() {
  const problems = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest('pre, code')) continue;
    const text = node.textContent;
    const where = `${node.parentElement.tagName.toLowerCase()}: ${JSON.stringify(text.trim().slice(0, 100))}`;
    if (text.includes('**')) problems.push(`"**" left as text in ${where}`);
    if (text.includes('`')) problems.push(`a backtick left as text (an unclosed code span?) in ${where}`);
    if (/```|~~~/.test(text)) problems.push(`a code fence left as text in ${where}`);
    if (text.includes('](')) problems.push(`link syntax left as text in ${where}`);
    if (/(^|\n)\s*\|.*\|\s*($|\n)/.test(text) || /\|\s*-{3,}/.test(text)) {
      problems.push(`a table row left as text in ${where}`);
    }
  }
  for (const p of document.querySelectorAll('p')) {
    if (/^#{1,6}(\s|$)/.test(p.textContent)) problems.push(`a heading left as a paragraph: ${p.textContent.slice(0, 80)}`);
  }
  return problems;
}

let browser;
const documents = [];

before(async () => {
  await access(executablePath).catch(() => {
    throw new Error(`no Chromium at ${executablePath}: apt-get install chromium (or set CHROMIUM)`);
  });
  documents.push('README.md');
  for (const name of (await readdir(join(root, 'docs'))).sort()) {
    if (name.endsWith('.md')) documents.push(`docs/${name}`);
  }
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  await mkdir(artifacts, { recursive: true });
});

after(async () => {
  await browser?.close();
});

/** The document rendered into a page of its own; requests leaving the page are refused. */
async function render(file) {
  const source = await readFile(join(root, file), 'utf8');
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>${file}</title>` +
    `<style>${style}</style></head><body>${md.render(source)}</body></html>`;
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.route('**/*', (route) => route.abort());
  await page.setContent(html, { waitUntil: 'load' });
  return { source, page };
}

test('README.md renders with no Markdown left raw, and its screenshot', async () => {
  const { source, page } = await render('README.md');
  assert.deepEqual(unclosedFences(source), [], 'README.md');
  assert.deepEqual(await page.evaluate(rawMarkdownOnPage), [], 'README.md as rendered');
  // What a deployer comes for is there as structure, not as text: headings, the settings
  // table, the refusal and the RBAC as code blocks.
  const shape = await page.evaluate(() => ({
    h1: document.querySelectorAll('h1').length,
    h2: [...document.querySelectorAll('h2')].map((h) => h.textContent),
    tables: document.querySelectorAll('table').length,
    blocks: [...document.querySelectorAll('pre code')].map((c) => c.textContent.split('\n')[0]),
  }));
  assert.equal(shape.h1, 1, 'one title');
  assert.ok(shape.h2.length >= 6, `sections: ${shape.h2.join(' | ')}`);
  assert.ok(shape.tables >= 1, 'the settings table is a table');
  assert.ok(shape.blocks.some((b) => b.startsWith('$ kubectl apply -f pool-1-a.yaml')), 'the refusal is a code block');
  assert.ok(shape.blocks.some((b) => b.startsWith('apiVersion: rbac.authorization.k8s.io/v1')), 'the RBAC is a code block');
  await page.screenshot({ path: join(artifacts, 'README.png'), fullPage: true });
  console.log(`README.md: ${source.split('\n').length - 1} lines, ${Buffer.byteLength(source)} bytes; ` +
    `sections: ${shape.h2.join(' | ')}; screenshot in target/readme-render/README.png`);
  await page.close();
});

test('docs/*.md render with no Markdown left raw', async () => {
  const problems = [];
  for (const file of documents.filter((f) => f !== 'README.md')) {
    const { source, page } = await render(file);
    problems.push(...unclosedFences(source).map((p) => `${file} ${p}`));
    problems.push(...(await page.evaluate(rawMarkdownOnPage)).map((p) => `${file}: ${p}`));
    await page.close();
  }
  assert.deepEqual(problems, []);
});
