// The playground page in a real browser: Debian's Chromium, headless, driven by playwright-core
// (which brings no browser of its own). The page is served by a static server started here on
// 127.0.0.1 (a free port); the machine has no other network.
//
// Clicks three example buttons and checks the verdict panel against each scenario's own
// expectation (examples.json), edits the settings by typing, reopens the shareable link in a
// new page, and measures the time to first verdict over a few loads. Artifacts (screenshot,
// timings) go to target/playground-artifacts/. A missing Chromium fails the test.
//
// CHROMIUM overrides the browser path (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { readFile, mkdtemp, mkdir, rm, writeFile, access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, extname, normalize, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const www = join(here, '..', 'www');
const artifacts = join(here, '..', '..', '..', 'target', 'playground-artifacts');
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const LOADS = 5;

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm' };

let server, base, context, profile, examples;

before(async () => {
  await access(executablePath).catch(() => {
    throw new Error(`no Chromium at ${executablePath}: apt-get install chromium (or set CHROMIUM)`);
  });
  examples = JSON.parse(await readFile(join(www, 'examples.json'), 'utf8'));
  server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, 'http://x').pathname));
    const file = join(www, path.endsWith('/') ? path + 'index.html' : path);
    try {
      if (!file.startsWith(www)) throw new Error('outside');
      const body = await readFile(file);
      response.writeHead(200, { 'Content-Type': types[extname(file)] ?? 'application/octet-stream',
        'Cache-Control': 'no-store' });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${server.address().port}/`;
  profile = await mkdtemp(join(tmpdir(), 'playground-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  await mkdir(artifacts, { recursive: true });
});

after(async () => {
  await context?.close();
  server?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

/** A new page on `url`, with console errors and failed requests collected. */
async function open(url) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.verdicts ?? 0) > 0, null, { timeout: 30000 });
  return { page, problems };
}

/** The verdict panel as a person reads it. */
async function panel(page) {
  return page.evaluate(() => {
    const text = (id) => document.getElementById(id).textContent.trim();
    const items = (id) => [...document.querySelectorAll(`#${id} li`)].map((li) => li.textContent);
    return {
      status: text('verdict-status'),
      message: text('verdict-message'),
      warnings: items('verdict-warnings'),
      audit: items('verdict-audit'),
      changed: items('verdict-changed'),
      suggested: document.getElementById('verdict-suggested-box').hidden ? null : text('verdict-suggested'),
      violations: [...document.querySelectorAll('#verdict-violations tbody tr')]
        .map((tr) => [...tr.cells].map((td) => td.textContent)),
    };
  });
}

/** Clicks and waits for the verdict that follows. */
async function clickAndJudge(page, selector) {
  const before = await page.evaluate(() => Number(document.body.dataset.verdicts));
  await page.click(selector);
  await page.waitForFunction((n) => Number(document.body.dataset.verdicts) > n, before);
  return panel(page);
}

/** The panel against a scenario's own expect, as the e2e runner checks kwctl's answer. */
function assertExpected(shown, expect, name) {
  const status = expect.allowed ? 'ALLOWED' : `REJECTED (${expect.code ?? 403})`;
  assert.equal(shown.status, status, name);
  for (const fragment of expect.messageContains ?? []) assert.ok(shown.message.includes(fragment), `${name}: ${fragment}`);
  for (const fragment of expect.warningsContain ?? []) {
    assert.ok(shown.warnings.some((w) => w.includes(fragment)), `${name}: warning ${fragment}`);
  }
  if (expect.warnings !== undefined) assert.equal(shown.warnings.length, expect.warnings, `${name}: warnings`);
}

const example = (name) => {
  const found = examples.find((e) => e.name === name);
  assert.ok(found, `${name} in examples.json`);
  return found;
};

let page;

test('three example scenarios, clicked, answer as their scenarios expect', async () => {
  let problems;
  ({ page, problems } = await open(base));

  const rotation = await clickAndJudge(page, '[data-example="kubeadmconfig-v1beta2-token-rotation"]');
  assertExpected(rotation, example('kubeadmconfig-v1beta2-token-rotation').expect, 'token rotation');
  assert.equal(rotation.message, '');
  assert.equal(rotation.suggested, null);
  assert.deepEqual(rotation.violations, []);
  assert.ok(rotation.changed.includes('spec.joinConfiguration.discovery.bootstrapToken.token'), rotation.changed.join());

  const edit = await clickAndJudge(page, '[data-example="kubeadmconfig-v1beta2-edit-in-use"]');
  assertExpected(edit, example('kubeadmconfig-v1beta2-edit-in-use').expect, 'edit in use');
  assert.deepEqual(edit.violations, [
    ['spec.files[0].content', 'Forbidden: changed', 'reject'],
    ['spec.joinConfiguration.nodeRegistration.kubeletExtraArgs[0].value', 'Forbidden: changed', 'reject'],
  ]);
  assert.match(edit.suggested, /^workers-spot-[0-9a-f]{8}$/);
  assert.notEqual(edit.suggested, 'workers-spot-8d2f0a1c');
  assert.ok(edit.message.includes(`create a new KubeadmConfig "${edit.suggested}"`), edit.message);

  const configRef = await clickAndJudge(page, '[data-example="machinepool-v1beta2-rotate-configref"]');
  assertExpected(configRef, example('machinepool-v1beta2-rotate-configref').expect, 'rotate configRef');
  assert.ok(configRef.changed.includes('spec.template.spec.bootstrap.configRef.name'), configRef.changed.join());

  assert.deepEqual(problems, []);
});

test('typing settings re-judges; refused settings show validate_settings\' message', async () => {
  await clickAndJudge(page, '[data-example="kubeadmconfig-v1beta2-edit-in-use"]');
  await page.fill('#settings', '{"inPlaceEdits": "warn"}');
  let shown = await clickAndJudge(page, '#evaluate');
  assert.equal(shown.status, 'ALLOWED');
  assert.equal(shown.warnings.length, 1);
  assert.ok(shown.warnings[0].startsWith('spec.files[0].content (+1 more) edited in place'), shown.warnings[0]);

  await page.fill('#settings', '{"inPlaceEdit": "allow"}');
  shown = await clickAndJudge(page, '#evaluate');
  assert.equal(shown.status, 'SETTINGS REFUSED');
  assert.ok(shown.message.startsWith('inPlaceEdit: unknown setting'), shown.message);

  await page.fill('#settings', '{}');
  await page.fill('#new', 'spec: [unclosed');
  shown = await clickAndJudge(page, '#evaluate');
  assert.equal(shown.status, 'INPUT ERROR');
  assert.ok(shown.message.startsWith('the new object is not valid YAML'), shown.message);
  assert.ok(await page.evaluate(() => document.getElementById('new').classList.contains('fault')));
});

test('the shareable URL reopens the same inputs and verdict', async () => {
  const shown = await clickAndJudge(page, '[data-example="kubeadmconfig-v1beta2-edit-in-use"]');
  await page.fill('#username', 'bob@example.com');
  await clickAndJudge(page, '#evaluate');
  const url = page.url();
  assert.match(url, /#[zj]=[A-Za-z0-9_-]+$/);
  const values = () => page.evaluate(() => Object.fromEntries(
    ['old', 'new', 'settings', 'operation', 'username', 'groups', 'subresource']
      .map((id) => [id, document.getElementById(id).value])));
  const sent = await values();
  await page.screenshot({ path: join(artifacts, 'playground.png'), fullPage: true });

  const { page: reopened, problems } = await open(url);
  const received = await reopened.evaluate(() => Object.fromEntries(
    ['old', 'new', 'settings', 'operation', 'username', 'groups', 'subresource']
      .map((id) => [id, document.getElementById(id).value])));
  assert.deepEqual(received, sent);
  assert.equal(received.username, 'bob@example.com');
  const again = await panel(reopened);
  assert.equal(again.status, 'REJECTED (403)');
  assert.equal(again.message, shown.message);
  assert.equal(again.suggested, shown.suggested);
  assert.deepEqual(problems, []);
  await reopened.close();
});

test('time to first verdict', async () => {
  const times = [];
  for (let i = 0; i < LOADS; i++) {
    const { page: loaded } = await open(base);
    times.push(await loaded.evaluate(() => performance.getEntriesByName('first-verdict')[0].startTime));
    await loaded.close();
  }
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  const sizes = {};
  for (const file of ['index.html', 'app.js', 'style.css', 'examples.json',
    'pkg/capi_rollout_playground.js', 'pkg/capi_rollout_playground_bg.wasm']) {
    sizes[file] = (await readFile(join(www, file))).length;
  }
  const browser = context.browser()?.version() ?? (await context.newCDPSession(page)
    .then((s) => s.send('Browser.getVersion')).then((v) => v.product).catch(() => 'chromium'));
  const report = { loads: times.map((t) => Math.round(t)), medianMs: Math.round(median), sizes, browser };
  await writeFile(join(artifacts, 'timing.json'), JSON.stringify(report, null, 2) + '\n');
  console.log(`time to first verdict: median ${report.medianMs} ms over ${LOADS} loads ${JSON.stringify(report.loads)}`);
  assert.ok(median > 0 && median < 30000);
});
