// The playground page: inputs -> the policy's rules (pkg/, built by wasm-bindgen from
// tools/playground/src/lib.rs) -> the verdict panel. The inputs live in the URL fragment, so a link
// reproduces what its sender saw.
import init, { evaluate } from './pkg/capi_rollout_playground.js';

const $ = (id) => document.getElementById(id);
const fields = { old: $('old'), new: $('new'), settings: $('settings'), operation: $('operation'),
  username: $('username'), groups: $('groups'), subResource: $('subresource') };
let examples = [];
let ready = false;
let firstVerdict = true;

// --- the URL fragment: #z=<base64url(deflate-raw(JSON))>, or #j=<base64url(JSON)> where the
// browser has no CompressionStream.
const toBase64url = (bytes) => {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};
const fromBase64url = (text) => {
  const binary = atob(text.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
};
const pipe = async (bytes, stream) =>
  new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(stream)).arrayBuffer());

function inputs() {
  const out = {};
  for (const [key, element] of Object.entries(fields)) out[key] = element.value;
  return out;
}

async function encodeInputs(values) {
  const json = new TextEncoder().encode(JSON.stringify(values));
  if (typeof CompressionStream === 'function') {
    return 'z=' + toBase64url(await pipe(json, new CompressionStream('deflate-raw')));
  }
  return 'j=' + toBase64url(json);
}

async function decodeInputs(fragment) {
  const [kind, data] = [fragment.slice(0, 2), fragment.slice(2)];
  let bytes = fromBase64url(data);
  if (kind === 'z=') bytes = await pipe(bytes, new DecompressionStream('deflate-raw'));
  else if (kind !== 'j=') throw new Error('unknown link format');
  return JSON.parse(new TextDecoder().decode(bytes));
}

function fill(values) {
  for (const [key, element] of Object.entries(fields)) {
    if (typeof values[key] === 'string') element.value = values[key];
  }
}

// --- the verdict panel
function list(id, items, render = (item) => item) {
  const ul = $(id);
  ul.replaceChildren(...items.map((item) => {
    const li = document.createElement('li');
    li.textContent = render(item);
    return li;
  }));
  $(id + '-box').hidden = items.length === 0;
}

function show(answer, millis) {
  const status = $('verdict-status');
  for (const f of ['old', 'new', 'settings']) fields[f].classList.remove('fault');
  let verdict = answer;
  if (answer.kind === 'inputError') {
    status.textContent = answer.input === 'settings' ? 'SETTINGS REFUSED' : 'INPUT ERROR';
    status.className = 'input-error';
    $('verdict-message').textContent = answer.error;
    if (fields[answer.input]) fields[answer.input].classList.add('fault');
    verdict = { warnings: [], violations: [], changedPaths: [], auditAnnotations: {} };
  } else {
    status.textContent = verdict.allowed ? 'ALLOWED'
      : verdict.code === 403 ? 'REJECTED (403)' : `REJECTED (${verdict.code ?? 'no code'})`;
    status.className = verdict.allowed ? 'allowed' : 'rejected';
    $('verdict-message').textContent = verdict.message ?? '';
  }
  $('verdict-suggested').textContent = verdict.suggestedName ?? '';
  $('verdict-suggested-box').hidden = !verdict.suggestedName;
  const rows = verdict.violations.map((v) => {
    const tr = document.createElement('tr');
    for (const text of [v.path || '(more)', v.detail, v.action]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  });
  $('verdict-violations').tBodies[0].replaceChildren(...rows);
  $('verdict-violations-box').hidden = rows.length === 0;
  list('verdict-warnings', verdict.warnings);
  list('verdict-audit', Object.entries(verdict.auditAnnotations), ([k, v]) => `${k}: ${v}`);
  list('verdict-changed', verdict.changedPaths);
  $('verdict-time').textContent = `Evaluated in ${millis.toFixed(1)} ms.`;
  if (firstVerdict) {
    firstVerdict = false;
    performance.mark('first-verdict');
  }
}

// data-verdicts counts the verdicts whose whole state is written: the panel AND the link in
// the address bar. Whatever reads the page after the count moves (a person copying the URL,
// the browser test) sees inputs, verdict and fragment that belong together.
function signalVerdict() {
  document.body.dataset.verdicts = String(Number(document.body.dataset.verdicts ?? 0) + 1);
}

function markUnused() {
  const op = fields.operation.value;
  fields.old.disabled = op === 'CREATE';
  fields.new.disabled = op === 'DELETE';
}

// Runs overlap: each awaits the fragment's compression, and a newer one (a keystroke, a click)
// may start meanwhile. Only the newest writes the URL and signals, so an older run can never
// put its inputs into the link after a newer verdict is on screen.
let latestRun = 0;

async function run() {
  if (!ready) return;
  const thisRun = ++latestRun;
  markUnused();
  const v = inputs();
  const context = JSON.stringify({
    username: v.username.trim(),
    groups: v.groups.split(',').map((g) => g.trim()).filter(Boolean),
    subResource: v.subResource,
  });
  const started = performance.now();
  let answer;
  try {
    answer = JSON.parse(evaluate(v.old, v.new, v.operation, v.settings, context));
  } catch (error) {
    // A bug in the engine: say so rather than show a stale verdict.
    answer = { kind: 'inputError', input: '', error: `internal error, please report it: ${error.message ?? error}` };
  }
  show(answer, performance.now() - started);
  const fragment = '#' + await encodeInputs(v);
  if (thisRun !== latestRun) return;
  history.replaceState(null, '', fragment);
  signalVerdict();
}

function loadExample(name) {
  const example = examples.find((e) => e.name === name);
  if (!example) return;
  fill({ old: example.old, new: example.new, settings: example.settings, operation: example.operation,
    username: example.username, groups: example.groups.join(', '), subResource: example.subResource });
  $('example').value = name;
  $('example-description').textContent = example.description;
  run();
}

let timer;
function scheduled() {
  if (!$('live').checked) return;
  clearTimeout(timer);
  timer = setTimeout(run, 250);
}

async function main() {
  const [, loaded] = await Promise.all([
    init(),
    fetch('examples.json').then((r) => (r.ok ? r.json() : [])).catch(() => []),
  ]);
  examples = loaded;
  $('example').append(...examples.map((e) => new Option(e.name, e.name)));
  for (const button of document.querySelectorAll('[data-example]')) {
    button.disabled = !examples.some((e) => e.name === button.dataset.example);
    button.addEventListener('click', () => loadExample(button.dataset.example));
  }
  $('example').addEventListener('change', (e) => loadExample(e.target.value));
  $('evaluate').addEventListener('click', run);
  for (const element of Object.values(fields)) element.addEventListener('input', scheduled);
  $('share').addEventListener('click', async () => {
    await run();
    try {
      await navigator.clipboard.writeText(location.href);
      $('share-status').textContent = 'Link copied.';
    } catch {
      $('share-status').textContent = 'The address bar holds the link.';
    }
  });
  ready = true;
  const fragment = location.hash.slice(1);
  if (fragment) {
    try {
      fill(await decodeInputs(fragment));
      $('example-description').textContent = 'Loaded from the link.';
    } catch (error) {
      $('example-description').textContent = `The link could not be read (${error.message}).`;
    }
    run();
  } else {
    loadExample('kubeadmconfig-v1beta2-edit-in-use');
    if (!examples.length) run();
  }
}

main().catch((error) => {
  $('verdict-status').textContent = 'FAILED TO LOAD';
  $('verdict-message').textContent = String(error);
});
