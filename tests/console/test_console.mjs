// The console (docs/console.md) in a real headless Chromium, driven over the
// DevTools protocol (puppeteer-core, installed in this folder by npm ci)
// against the real llmlimitd: a scripted workload, then the page's figures
// are held to the API's, a new reserve must show up without a reload, a
// hostile key and caller must render as text, a wrong token must show an
// error and no data, the browser console must stay free of errors, and the
// page must fit a phone's width and read well at a phone's and a desktop's
// (no text cut off or under a bar, every value labelled, names broken only
// after punctuation, money in dollars, the denial figures in agreement).
// The Keys panel runs against gateway mode on the gateway tests' fake
// upstream: keys listed as the API lists them, a new secret shown once,
// blocked, rotated and revoked keys refused by the gateway.
// Screenshots go to --out (the build tree).
//
//   node test_console.mjs --binary build/llmlimitd --out build/console [--backend sqlite]
//        [--only main|spend|link|token|keys]
//
// Exits 77 (skipped) when Chromium or node_modules is missing.
import {spawn} from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const SKIP = 77;

function argument(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const BINARY = path.resolve(argument('binary', 'build/llmlimitd'));
const OUT = path.resolve(argument('out', 'build/console-screenshots'));
const BACKEND = argument('backend', 'memory');
const ONLY = argument('only', ''); // one scenario by name (main, spend, link, token, keys, tools)
const CHROMIUM = argument('chromium', process.env.CHROMIUM || '/usr/bin/chromium');

if (!fs.existsSync(CHROMIUM)) {
  console.log('SKIPPED: no Chromium at ' + CHROMIUM + ' (Debian package chromium)');
  process.exit(SKIP);
}
let puppeteer;
try {
  puppeteer = (await import('puppeteer-core')).default;
} catch (e) {
  console.log('SKIPPED: puppeteer-core is not installed (npm ci in tests/console)');
  process.exit(SKIP);
}

const HOSTILE_KEY = 'evil:<img/src=x/onerror=alert(1)>';
const HOSTILE_CALLER = 'evil:<script>window.__pwned=1</script>';
const SALES = 'team:sales:usd:month';
const OPS = 'team:ops:usd:day';
const TPM = 'global:openai:gpt-4o:tpm';
const RPM = 'global:openai:gpt-4o:rpm';
const SLOTS = 'local:llama:concurrent';
const BERLIN = 'zone:berlin:usd:day';
const PREPAID = 'zone:prepaid:credits';
// Long enough to wrap on a phone and in the desktop's key column.
const LONG_KEY = 'global:openai:gpt-4o-mini-2024-07-18:tokens-per-minute:eu-west-1';
// A budget whose amounts are wider than a money column's narrowest width.
const ORG = 'org:usd:month';
// A caller name long enough to wrap in a budget card's callers table.
const LONG_CALLER = 'nightly-report-writer';
const RATE_WINDOW_MS = 600000; // the spend rate's window (SPEND_RATE_WINDOW_MS)

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- llmlimitd -----------------------------------------------------------------

class Server {
  constructor(args, env) {
    this.dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-console-'));
    this.args = ['--listen', '127.0.0.1:0', '--backend', BACKEND, '--data-dir', this.dataDir,
                 ...args];
    this.env = {...process.env, ...env};
    this.stderr = '';
  }

  start() {
    return new Promise((resolve, reject) => {
      this.process = spawn(BINARY, this.args, {env: this.env, stdio: ['ignore', 'ignore', 'pipe']});
      const timer = setTimeout(() => reject(new Error('llmlimitd did not start:\n' + this.stderr)),
                               10000);
      this.process.stderr.on('data', (chunk) => {
        this.stderr += chunk.toString();
        const match = /llmlimitd listening on ([0-9.]+):([0-9]+)/.exec(this.stderr);
        if (match && !this.url) {
          this.url = 'http://' + match[1] + ':' + match[2];
          clearTimeout(timer);
          resolve(this);
        }
      });
      this.process.on('exit', (code) => {
        this.exitCode = code;
        if (!this.url) reject(new Error('llmlimitd exited ' + code + ':\n' + this.stderr));
      });
    });
  }

  async stop() {
    if (this.process && this.exitCode === undefined) {
      const exited = new Promise((resolve) => this.process.on('exit', resolve));
      this.process.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(this.dataDir, {recursive: true, force: true});
  }

  async request(method, route, body, token) {
    const headers = {'Content-Type': 'application/json'};
    if (token) headers.Authorization = 'Bearer ' + token;
    const response = await fetch(this.url + route, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
    const text = await response.text();
    return {status: response.status, body: text ? JSON.parse(text) : null};
  }

  async ok(method, route, body, token) {
    const answer = await this.request(method, route, body, token);
    if (answer.status !== 200) {
      throw new Error(method + ' ' + route + ': ' + answer.status + ' ' + JSON.stringify(answer.body));
    }
    return answer.body;
  }

  put(definition, token) {
    return this.ok('PUT', '/v1/admin/limits', definition, token);
  }

  reserve(leaseId, requirements, caller, token) {
    const body = {lease_id: leaseId,
                  requirements: Object.entries(requirements).map(([key, amount]) => ({key, amount}))};
    if (caller !== undefined) body.caller = caller;
    return this.ok('POST', '/v1/reserve', body, token);
  }

  complete(leaseId, actuals) {
    return this.ok('POST', '/v1/complete', {
      lease_id: leaseId,
      actuals: Object.entries(actuals).map(([key, amount]) => ({key, actual_amount: amount}))});
  }

  advance(ms) {
    return this.ok('POST', '/v1/admin/clock', {advance_ms: ms});
  }
}

// ---- the browser ---------------------------------------------------------------

async function openBrowser() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true, // Chromium's new headless mode (--headless=new)
    userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  browser.profile = profile;
  return browser;
}

async function closeBrowser(browser) {
  await browser.close();
  fs.rmSync(browser.profile, {recursive: true, force: true});
}

// A page that records what the browser console said, the requests it made
// and any dialog (an alert() would be script injected through a key).
async function newPage(browser, width, height) {
  const page = await browser.newPage();
  page.messages = [];
  page.requests = [];
  page.dialogs = [];
  page.navigations = 0;
  page.on('console', (m) => page.messages.push({type: m.type(), text: m.text()}));
  page.on('pageerror', (e) => page.messages.push({type: 'pageerror', text: e.message}));
  page.on('request', (r) => page.requests.push(r.url()));
  page.on('dialog', async (d) => {
    page.dialogs.push(d.message());
    await d.dismiss();
  });
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) page.navigations++;
  });
  await page.setViewport({width, height});
  return page;
}

const refreshes = (page) => page.evaluate(() => Number(document.body.dataset.refreshes || 0));

// Waits for a refresh that started after now (the page's figures are then
// at least as new as anything done before the call).
async function nextRefresh(page) {
  const seen = await refreshes(page);
  await page.waitForFunction((n) => Number(document.body.dataset.refreshes || 0) >= n + 2,
                             {timeout: 20000}, seen);
}

// Every row of the limits table: its key and each cell's reported value and text.
function pageRows(page) {
  return page.evaluate(() => [...document.querySelectorAll('#limits-body .lrow')].map((tr) => {
    const cells = {};
    for (const td of tr.querySelectorAll('.cell')) {
      const main = td.querySelector('.main');
      const column = [...td.classList].find((c) => c.startsWith('c-')).slice(2);
      cells[column] = {value: td.dataset.value, text: main ? main.textContent : '',
                                  sub: td.querySelector('.sub') ? td.querySelector('.sub').textContent : ''};
    }
    return {key: tr.dataset.key, cells};
  }));
}

// ---- checks --------------------------------------------------------------------

let failures = 0;
let passed = 0;

function check(condition, what) {
  if (!condition) {
    failures++;
    console.log('  FAIL ' + what);
  }
  return condition;
}

function equal(actual, expected, what) {
  return check(actual === expected, what + ': ' + JSON.stringify(actual) + ' !== ' +
                                    JSON.stringify(expected));
}

async function run(name, proves, body) {
  const before = failures;
  try {
    await body();
  } catch (e) {
    failures++;
    console.log('  FAIL ' + name + ' threw: ' + (e && e.stack ? e.stack : e));
  }
  if (failures === before) passed++;
  console.log((failures === before ? 'ok   ' : 'FAIL ') + name + ': ' + proves);
}

// Console messages that are errors or warnings, but for those `allowed` matches.
function consoleProblems(page, allowed) {
  return page.messages.filter((m) => (m.type === 'error' || m.type === 'warn' ||
                                      m.type === 'warning' || m.type === 'pageerror') &&
                                     !(allowed && allowed.test(m.text)));
}

// ---- the scripted workload -----------------------------------------------------

async function workload(server) {
  await server.put({key: SALES, kind: 'budget', capacity: 100000000, period: 'month',
                    timeout_seconds: 300, unit: 'usd_micros',
                    description: 'Sales team monthly spend'});
  await server.put({key: OPS, kind: 'budget', capacity: 5000000, period: 'day',
                    timeout_seconds: 300, unit: 'usd_micros', alerts: [{at_percent: 100}]});
  await server.put({key: BERLIN, kind: 'budget', capacity: 5000000, period: 'day',
                    time_zone: 'Europe/Berlin', unit: 'usd_micros'});
  await server.put({key: PREPAID, kind: 'budget', capacity: 1000, period: 'none',
                    unit: 'credits'});
  await server.put({key: TPM, kind: 'rolling', capacity: 30000, window_seconds: 3600,
                    unit: 'tokens'});
  await server.put({key: RPM, kind: 'rolling', capacity: 500, window_seconds: 3600,
                    unit: 'requests'});
  await server.put({key: SLOTS, kind: 'concurrency', capacity: 4, timeout_seconds: 3600,
                    unit: 'requests'});
  await server.put({key: HOSTILE_KEY, kind: 'rolling', capacity: 10, window_seconds: 3600});
  await server.put({key: LONG_KEY, kind: 'rolling', capacity: 10, window_seconds: 3600});
  await server.put({key: ORG, kind: 'budget', capacity: 10000000000, period: 'month',
                    timeout_seconds: 300, unit: 'usd_micros'});
  // A spend history: four calls ten minutes apart, each sampled by the server.
  for (let i = 0; i < 4; i++) {
    await server.reserve('hist-' + i, {[SALES]: 1500000}, 'bot-a');
    await server.complete('hist-' + i, {[SALES]: 1000000});
    await waitForSample(server, SALES, i + 1);
    await server.advance(600000);
  }
  // Calls with three callers: most completed, one released, some still open.
  const callers = ['bot-a', 'bot-b', 'bot-c'];
  for (let i = 0; i < 12; i++) {
    await server.reserve('call-' + i, {[SALES]: 2000000, [TPM]: 1200, [RPM]: 1},
                         callers[i % 3]);
  }
  for (let i = 0; i < 8; i++) await server.complete('call-' + i, {[SALES]: 1500000, [TPM]: 900});
  await server.ok('POST', '/v1/release', {lease_id: 'call-8'});
  // Slots: four fit, the fifth is denied; the hostile caller holds them.
  for (let i = 0; i < 5; i++) await server.reserve('slot-' + i, {[SLOTS]: 1}, HOSTILE_CALLER);
  // A definitive denial naming the hostile key, and a budget overrun.
  await server.reserve('too-big', {[HOSTILE_KEY]: 11}, 'bot-b');
  await server.reserve('too-long', {[LONG_KEY]: 11}, 'bot-b');
  await server.reserve('ops-1', {[OPS]: 3000000}, LONG_CALLER);
  await server.complete('ops-1', {[OPS]: 6000000});
  // $1,234.567891 spent of $10,000, $10.000012 still held.
  await server.reserve('org-1', {[ORG]: 2000000000}, 'bot-a');
  await server.complete('org-1', {[ORG]: 1234567891});
  await server.reserve('org-2', {[ORG]: 10000012}, LONG_CALLER);
  // The batch route feeds the same counters.
  await server.ok('POST', '/v1/reserve/batch', {requests: [
    {lease_id: 'batch-1', requirements: [{key: RPM, amount: 1}], caller: 'bot-c'},
    {lease_id: 'batch-2', requirements: [{key: SLOTS, amount: 1}], caller: 'bot-c'}]});
}

async function waitForSample(server, key, count) {
  for (let i = 0; i < 100; i++) {
    const spend = await server.ok('GET', '/v1/console/spend/' + encodeURIComponent(key));
    if (spend.points.length >= count) return spend;
    await sleep(100);
  }
  throw new Error('no spend sample of ' + key);
}

// ---- scenario: the page against the API ----------------------------------------

async function pageMatchesApi(server, page) {
  await nextRefresh(page);
  const rows = await pageRows(page);
  const api = await server.ok('GET', '/v1/console/limits?limit=1000');
  equal(rows.length, api.limits.length, 'rows on the page');
  for (const limit of api.limits) {
    const row = rows.find((r) => r.key === limit.key);
    if (!check(row !== undefined, 'a row for ' + limit.key)) continue;
    const usage = await server.ok('GET', '/v1/usage/' + encodeURIComponent(limit.key));
    for (const field of ['capacity', 'reserved', 'used', 'debt', 'available']) {
      equal(row.cells[field].value, String(limit[field]), limit.key + ' ' + field + ' (console API)');
      equal(row.cells[field].value, String(usage[field]), limit.key + ' ' + field + ' (usage API)');
    }
    equal(row.cells.holds.value, String(limit.holds.count), limit.key + ' holds');
    equal(row.cells.soon.value, String(limit.holds.expiring_soon), limit.key + ' expiring soon');
    equal(row.cells.status.text, limit.status, limit.key + ' status');
  }
  const sales = rows.find((r) => r.key === SALES);
  equal(sales.cells.capacity.text, '$100.00', 'money in dollars');
  equal(sales.cells.capacity.sub, '100,000,000', '... and in usd_micros');
  const tpm = rows.find((r) => r.key === TPM);
  equal(tpm.cells.capacity.text, '30,000', 'a token amount');
}

async function budgetsMatchApi(server, page) {
  const spend = await server.ok('GET', '/v1/console/spend/' + encodeURIComponent(SALES));
  await nextRefresh(page); // the card drawn from an answer at least as new (the sampler goes on)
  const card = await page.evaluate((key) => {
    const node = [...document.querySelectorAll('#budgets .card')].find((c) => c.dataset.key === key);
    if (!node) return null;
    const figure = (name) => node.querySelector('[data-figure="' + name + '"] dd').dataset.value;
    const line = node.querySelector('polyline.spent');
    return {spent: figure('spent'), capacity: figure('capacity'), available: figure('available'),
            points: line ? line.getAttribute('points').trim().split(/\s+/).length : 0,
            projection: node.querySelector('line.projection') !== null,
            text: node.querySelector('.projection-text').textContent,
            callers: [...node.querySelectorAll('tr[data-caller]')].map((tr) =>
              [tr.dataset.caller, tr.children[1].dataset.value, tr.children[2].dataset.value])};
  }, SALES);
  if (!check(card !== null, 'a budget card for ' + SALES)) return;
  equal(card.spent, String(spend.spent), 'spent');
  equal(card.capacity, String(spend.capacity), 'capacity');
  equal(card.available, String(spend.available), 'available');
  check(card.points >= spend.points.length + 1, 'the chart draws every sample and now');
  check(spend.rate_per_hour !== null, 'the server knows a rate: ' + JSON.stringify(spend));
  check(card.projection, 'the projection line is drawn');
  check(spend.runs_out_at_unix_ms === null ? /does not run out/.test(card.text)
                                           : /runs out in/.test(card.text),
        'the projection is told: ' + card.text);
  const callers = await server.ok('GET', '/v1/usage/' + encodeURIComponent(SALES) + '?group_by=caller');
  equal(JSON.stringify(card.callers), JSON.stringify(callers.callers.slice(0, 5)
    .map((c) => [c.caller, String(c.spent), String(c.calls)])),
        'top callers with their spend (used + debt) and calls, in the server\'s order');
}

async function hostileRendersAsText(server, page) {
  const seen = await page.evaluate((key, caller) => {
    const row = [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === key);
    const callers = [...document.querySelectorAll('#denials td.caller')].map((td) => td.textContent);
    const errors = [...document.querySelectorAll('#denials td.error')].map((td) => td.textContent);
    return {keyText: row ? row.querySelector('.c-key .main').textContent : null,
            images: document.querySelectorAll('img').length,
            scripts: document.scripts.length,
            pwned: window.__pwned !== undefined,
            callerShown: callers.includes(caller),
            errorShown: errors.includes('exceeds_capacity:' + key)};
  }, HOSTILE_KEY, HOSTILE_CALLER);
  equal(seen.keyText, HOSTILE_KEY, 'the hostile key as text');
  equal(seen.images, 0, 'no <img> made from a key');
  equal(seen.scripts, 1, 'no <script> but the page\'s own');
  equal(seen.pwned, false, 'no injected script ran');
  check(seen.callerShown, 'the hostile caller shows as text in the denials');
  check(seen.errorShown, 'the definitive denial shows its error with the key');
  equal(page.dialogs.length, 0, 'no dialog opened');
}

async function newReserveShowsUp(server, page) {
  const before = (await pageRows(page)).find((r) => r.key === RPM).cells.reserved.value;
  const navigations = page.navigations;
  await server.reserve('live-1', {[RPM]: 7}, 'bot-live');
  const expected = String(Number(before) + 7);
  await page.waitForFunction((key, value) => {
    const row = [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === key);
    return row && row.querySelector('.c-reserved').dataset.value === value;
  }, {timeout: 15000}, RPM, expected);
  equal(page.navigations, navigations, 'no reload');
  const marker = await page.evaluate(() => window.performance.getEntriesByType('navigation').length);
  equal(marker, 1, 'one navigation in the page\'s life');
}

async function detailShowsHolders(server, page) {
  await page.evaluate((key) => {
    [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === key).click();
  }, TPM);
  await page.waitForFunction(() => document.querySelectorAll('#detail-holds tbody tr').length > 0,
                             {timeout: 15000});
  const holds = await server.ok('GET', '/v1/console/holds/' + encodeURIComponent(TPM));
  const shown = await page.evaluate(() => [...document.querySelectorAll('#detail-holds tbody tr')]
    .map((tr) => [tr.dataset.caller, tr.children[1].textContent]));
  equal(JSON.stringify(shown), JSON.stringify(holds.callers.map((c) => [c.caller, String(c.holds)])),
        'holds by caller as the API says');
}

// A zoned budget's period shows in its zone's local time, as /v1/usage gives
// it, in the table and in the limit's detail; a prepaid budget never resets.
async function periodsInLocalTime(server, page) {
  await nextRefresh(page);
  const usage = await server.ok('GET', '/v1/usage/' + encodeURIComponent(BERLIN));
  check(/^\d{4}-\d\d-\d\dT00:00:00[+-]0[12]:00$/.test(usage.period_start_local),
        'Berlin\'s day starts at local midnight: ' + usage.period_start_local);
  const period = usage.period_start_local + ' to ' + usage.period_end_local;
  const resets = await page.evaluate((keys) => keys.map((key) => {
    const row = [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === key);
    const td = row.querySelector('.c-resets');
    return {title: td.title, text: td.querySelector('.main').textContent};
  }), [BERLIN, PREPAID]);
  equal(resets[0].title, 'this period: ' + period, 'the resets cell of a zoned budget');
  equal(resets[1].text, 'never', 'the resets cell of a prepaid budget');
  await page.evaluate((key) => {
    [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === key).click();
  }, BERLIN);
  await page.waitForFunction(() => document.querySelector('#detail-definition').textContent
    .includes('this period'), {timeout: 15000});
  const items = await page.evaluate(() => [...document.querySelectorAll('#detail-definition div')]
    .map((d) => [d.querySelector('dt').textContent, d.querySelector('dd').textContent]));
  const item = (name) => (items.find(([dt]) => dt === name) || [])[1];
  equal(item('period'), 'day (Europe/Berlin)', 'the detail names the zone');
  equal(item('this period'), period, 'the detail shows the local start and end');
}

// A reserve waiting on a held slot shows as one waiter with its age; once the
// slot frees and the waiter is admitted, the column says 0 again.
async function waitersShowUp(server, page) {
  const key = 'local:queue:concurrent';
  await server.put({key, kind: 'concurrency', capacity: 1, timeout_seconds: 300});
  await server.reserve('queue-holder', {[key]: 1}, 'bot-holder');
  const waiting = server.ok('POST', '/v1/reserve', {
    lease_id: 'queue-waiter', wait_ms: 60000, requirements: [{key, amount: 1}]});
  const cellIs = (value) => page.waitForFunction((k, v) => {
    const row = [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === k);
    return row && row.querySelector('.c-waiting') &&
           row.querySelector('.c-waiting').dataset.value === v;
  }, {timeout: 20000}, key, value);
  await cellIs('1');
  const api = await server.ok('GET', '/v1/console/limits?prefix=' + encodeURIComponent(key));
  equal(api.limits[0].waiters.count, 1, 'the API counts the waiter');
  const row = (await pageRows(page)).find((r) => r.key === key);
  check(/^oldest /.test(row.cells.waiting.sub), 'its age is shown: ' + row.cells.waiting.sub);
  check(row.cells.waiting.text === '1', 'one waiter shown: ' + row.cells.waiting.text);
  await server.ok('POST', '/v1/release', {lease_id: 'queue-holder'});
  const answer = await waiting;
  equal(answer.allowed, true, 'the waiter was admitted when the slot freed');
  await cellIs('0');
}

async function attentionNamesProblems(page) {
  const items = await page.evaluate(() => [...document.querySelectorAll('#attention li')]
    .map((li) => [li.dataset.kind, li.querySelector('.key') ? li.querySelector('.key').textContent : '']));
  check(items.some(([kind, key]) => kind === 'out' && key === SLOTS), 'used-up slots named');
  check(items.some(([kind, key]) => kind === 'debt' && key === OPS), 'budget debt named');
  check(items.some(([kind]) => kind === 'denials'), 'denials in the last minute named');
  // The debt passed the budget's 100 % alert: fired within a scan, shown within a refresh,
  // with its delivery state (no webhook here).
  const alert = await page.waitForFunction((key) => {
    const li = [...document.querySelectorAll('#attention li[data-kind="alert"]')]
      .find((item) => item.querySelector('.key') && item.querySelector('.key').textContent === key);
    return li ? li.textContent : null;
  }, {timeout: 20000}, OPS).then((handle) => handle.jsonValue()).catch(() => null);
  check(alert !== null && alert.includes('reached 100% of its capacity') &&
        alert.includes('no webhook'), 'the budget\'s fired alert named: ' + alert);
}

// Where each key shown on the page breaks across lines: a key may wrap only
// right after a ':' (docs/console.md). Returns the breaks elsewhere and how
// many keys wrapped at a ':' (so a test can tell that wrapping happened).
function keyBreaks(page) {
  return page.evaluate(() => {
    const wrong = [];
    let atColon = 0;
    const range = document.createRange();
    for (const node of document.querySelectorAll('.key')) {
      if (node.getClientRects().length === 0) continue; // not displayed
      const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
      let top = null, before = '', wrapped = false;
      for (let text = walker.nextNode(); text !== null; text = walker.nextNode()) {
        for (let i = 0; i < text.length; i++) {
          range.setStart(text, i);
          range.setEnd(text, i + 1);
          const rects = range.getClientRects();
          if (rects.length === 0) continue;
          const at = rects[0].top;
          if (top !== null && at > top + 1) {
            if (before === ':') wrapped = true;
            else wrong.push({key: node.textContent, after: before, next: text.data[i]});
          }
          top = at;
          before = text.data[i];
        }
      }
      if (wrapped) atColon++;
    }
    return {wrong, atColon};
  });
}

async function keysWrapAtColons(page, where) {
  await nextRefresh(page);
  const breaks = await keyBreaks(page);
  equal(JSON.stringify(breaks.wrong), '[]', 'keys break only after a colon (' + where + ')');
  check(breaks.atColon > 0, 'a long key wrapped at a colon (' + where + ')');
}

// Text on the page that cannot be read as drawn: text cut off by a box
// that hides its overflow or running out of its own cell into the next, and
// text under an inset shadow (the bar that marks a linked limit). Keys are
// left out: a key part too long for its column is cut on purpose, the whole
// key being in the row (docs/console.md).
function unreadableText(page) {
  return page.evaluate(() => {
    const name = (node) => node.tagName.toLowerCase() + (node.id ? '#' + node.id : '') +
      [...node.classList].map((c) => '.' + c).join('');
    const skipped = (node) => node.closest('.key, .c-key, svg, [hidden]') !== null;
    // The bands an inset box-shadow paints inside a box: [left, right, top, bottom].
    const insetBands = (shadow) => {
      const bands = [0, 0, 0, 0];
      for (const m of shadow.matchAll(/(-?[\d.]+)px (-?[\d.]+)px ([\d.]+)px (-?[\d.]+)px inset/g)) {
        const [x, y, blur, spread] = m.slice(1).map(Number);
        const extra = blur + spread;
        bands[0] = Math.max(bands[0], Math.max(0, x) + extra);
        bands[1] = Math.max(bands[1], Math.max(0, -x) + extra);
        bands[2] = Math.max(bands[2], Math.max(0, y) + extra);
        bands[3] = Math.max(bands[3], Math.max(0, -y) + extra);
      }
      return bands;
    };
    const found = [];
    const range = document.createRange();
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text !== null; text = walker.nextNode()) {
      if (text.data.trim() === '' || skipped(text.parentElement)) continue;
      range.selectNodeContents(text);
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      if (rects.length === 0) continue; // not drawn
      for (let box = text.parentElement; box !== document.body; box = box.parentElement) {
        const style = getComputedStyle(box);
        if (style.display === 'inline' || style.display === 'contents') continue;
        const outer = box.getBoundingClientRect();
        const left = outer.left + box.clientLeft, top = outer.top + box.clientTop;
        const right = left + box.clientWidth, bottom = top + box.clientHeight;
        if ((style.overflowX === 'hidden' || style.overflowX === 'clip') &&
            rects.some((r) => r.left < left - 0.5 || r.right > right + 0.5)) {
          found.push({text: text.data, why: 'cut by ' + name(box)});
        }
        const [bl, br, bt, bb] = insetBands(style.boxShadow);
        if (rects.some((r) => (bl > 0 && r.left < left + bl - 0.5) ||
                              (br > 0 && r.right > right - br + 0.5) ||
                              (bt > 0 && r.top < top + bt - 0.5) ||
                              (bb > 0 && r.bottom > bottom - bb + 0.5))) {
          found.push({text: text.data, why: 'under the inset shadow of ' + name(box)});
        }
      }
    }
    // A cell or figure whose text is wider than itself runs into its
    // neighbour; a budget card's content wider than the card spills out of
    // it (or would need scrolling across inside it).
    for (const cell of document.querySelectorAll('.lrow > div, td, th, dd, dt, .card, .card *')) {
      if (skipped(cell) || cell.getClientRects().length === 0) continue;
      if (cell.scrollWidth > cell.clientWidth + 1) {
        found.push({text: cell.textContent, why: 'wider than ' + name(cell) + ': ' +
                    cell.scrollWidth + ' > ' + cell.clientWidth});
      }
    }
    return found;
  });
}

// Each value of a limit has its label: over its column on a desktop (the
// header cell of the same column, spanning the value), beside it on a phone
// (the cell's ::before). Returns the cells whose label is missing or is not
// their column's name.
function unlabelledCells(page) {
  return page.evaluate(() => {
    const head = [...document.querySelectorAll('#limits .lrow.head > div')];
    const headShown = head.length > 0 && head[0].getClientRects().length > 0;
    const wrong = [];
    for (const row of document.querySelectorAll('#limits-body .lrow')) {
      [...row.children].forEach((cell, i) => {
        const column = [...cell.classList].find((c) => c.startsWith('c-')).slice(2);
        if (column === 'key' || column === 'bar') return; // the row's title; a picture
        const header = head[i] ? head[i].textContent.trim() : '';
        let label = '';
        if (headShown) {
          const h = head[i].getBoundingClientRect(), c = cell.getBoundingClientRect();
          if (h.left < c.right && h.right > c.left && h.bottom <= c.top + 1) label = header;
        } else {
          const before = getComputedStyle(cell, '::before');
          const content = before.content;
          const attribute = /^attr\(([\w-]+)\)$/.exec(content);
          if (before.display !== 'none' && attribute) label = cell.getAttribute(attribute[1]) || '';
          else if (before.display !== 'none' && /^".*"$/.test(content)) label = JSON.parse(content);
        }
        if (header === '' || label !== header) {
          wrong.push({key: row.dataset.key, column, label, header});
        }
      });
    }
    return {wrong, headShown};
  });
}

// Where caller names and lease ids break across lines: only after a
// punctuation mark (as in 'nightly-' / 'report'), never inside a word.
function callerBreaks(page) {
  return page.evaluate(() => {
    const wrong = [];
    let shown = 0;
    const range = document.createRange();
    for (const node of document.querySelectorAll('.caller, .lease')) {
      if (node.getClientRects().length === 0) continue;
      shown++;
      const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
      let top = null, before = '';
      for (let text = walker.nextNode(); text !== null; text = walker.nextNode()) {
        for (let i = 0; i < text.length; i++) {
          range.setStart(text, i);
          range.setEnd(text, i + 1);
          const rects = range.getClientRects();
          if (rects.length === 0) continue;
          if (top !== null && rects[0].top > top + 1 && /[A-Za-z0-9]/.test(before)) {
            wrong.push({name: node.textContent, after: before, next: text.data[i]});
          }
          top = rects[0].top;
          before = text.data[i];
        }
      }
    }
    return {wrong, shown};
  });
}

// An amount as the page writes it, in its unit's smallest part: dollars
// ('$1,234.5' is 1,234,500,000 usd_micros) or a plain integer; null when
// it is neither.
function amountOf(text, money) {
  const m = money ? /^(-?)\$([\d,]+)\.(\d{2,6})$/.exec(text) : /^(-?)([\d,]+)$/.exec(text);
  if (m === null) return null;
  const whole = BigInt(m[2].replace(/,/g, ''));
  const value = money ? whole * 1000000n + BigInt(m[3].padEnd(6, '0')) : whole;
  return String(m[1] === '-' ? -value : value);
}

// The denials list and the budgets' callers say money in dollars, each
// amount equal to the API's.
async function moneyInDollars(server, page, where) {
  const limits = (await server.ok('GET', '/v1/console/limits?limit=1000')).limits;
  const units = new Map(limits.map((l) => [l.key, l.unit]));
  const denials = (await server.ok('GET', '/v1/console/denials?limit=50')).denials;
  const shown = await page.evaluate(() =>
    [...document.querySelectorAll('#denials tbody tr')].map((tr) => ({
      id: tr.dataset.id,
      keys: [...tr.children[3].querySelectorAll(':scope > div')].filter((d) => d.querySelector('.key'))
        .map((d) => ({key: d.querySelector('.key').textContent,
                      amount: d.textContent.slice(d.querySelector('.key').textContent.length)
                        .trim().replace(/^\((.*)\)$/, '$1')}))})));
  let money = 0;
  for (const d of denials) {
    const row = shown.find((r) => r.id === String(d.id));
    if (!check(row !== undefined, 'denial ' + d.id + ' listed (' + where + ')')) continue;
    d.keys.forEach((k, i) => {
      const isMoney = units.get(k.key) === 'usd_micros';
      if (isMoney) money++;
      const seen = row.keys[i] || {key: null, amount: null};
      equal(seen.key, k.key, 'denial ' + d.id + ' names the key (' + where + ')');
      equal(amountOf(seen.amount, isMoney), String(k.amount), 'denial ' + d.id + ' of ' + k.key +
            ' asked ' + JSON.stringify(seen.amount) + (isMoney ? ', in dollars' : '') +
            ' (' + where + ')');
    });
  }
  check(money > 0, 'a denial of a money budget is listed (' + where + ')');
  const callers = await page.evaluate(() =>
    [...document.querySelectorAll('#budgets .card')].map((card) => ({
      key: card.dataset.key,
      rows: [...card.querySelectorAll('tr[data-caller]')].map((tr) => ({
        caller: tr.dataset.caller,
        spent: tr.children[1].firstChild.textContent,
        reserved: tr.children[3].firstChild.textContent}))})));
  for (const card of callers) {
    if (units.get(card.key) !== 'usd_micros') continue;
    const api = (await server.ok('GET', '/v1/usage/' + encodeURIComponent(card.key) +
                                 '?group_by=caller')).callers;
    for (const row of card.rows) {
      const c = api.find((a) => a.caller === row.caller);
      if (!check(c !== undefined, card.key + ' ' + row.caller + ' in the API')) continue;
      equal(amountOf(row.spent, true), String(c.spent), card.key + ' ' + row.caller + ' spent ' +
            JSON.stringify(row.spent) + ' in dollars (' + where + ')');
      equal(amountOf(row.reserved, true), String(c.reserved), card.key + ' ' + row.caller +
            ' reserved ' + JSON.stringify(row.reserved) + ' in dollars (' + where + ')');
    }
  }
}

// The throughput figures and the "N of M reserves denied in the last
// minute" line tell the same minute: N denials and M reserves in both, and
// a rate shown beside a count is not zero when the count is not.
async function denialsAgree(page, where) {
  const seen = await page.evaluate(() => {
    const item = document.querySelector('#attention li[data-kind="denials"]');
    const figure = (id) => {
      const dd = document.getElementById(id);
      const sub = dd.querySelector('.sub');
      return {label: dd.previousElementSibling.textContent,
              main: dd.firstChild ? dd.firstChild.textContent : '',
              sub: sub ? sub.textContent : ''};
    };
    return {attention: item ? item.textContent : null,
            figures: ['reserves-10s', 'reserves-60s', 'denials-10s', 'denials-60s']
              .map((id) => [id, figure(id)])};
  });
  const m = /^([\d,]+) of ([\d,]+) reserves denied in the last minute$/.exec(seen.attention || '');
  if (!check(m !== null, 'the attention panel counts the last minute\'s denials (' + where +
             '): ' + seen.attention)) return;
  const figures = Object.fromEntries(seen.figures);
  equal(figures['denials-60s'].main, m[1], figures['denials-60s'].label + ' beside "' +
        seen.attention + '" (' + where + ')');
  equal(figures['reserves-60s'].main, m[2], figures['reserves-60s'].label + ' beside "' +
        seen.attention + '" (' + where + ')');
  for (const [id, f] of seen.figures) {
    const count = Number(f.main.replace(/,/g, ''));
    check(count === 0 || !/^0(\.0+)?(\s|$)/.test(f.sub),
          id + ': a count of ' + f.main + ' beside a rate of ' + JSON.stringify(f.sub) +
          ' (' + where + ')');
  }
}

// What the issue of a page that reads badly listed, held at one width: a
// linked limit (marked by a bar) and a fresh denial of a money budget are
// on the page while it is measured.
async function readsWell(server, page, where) {
  await server.reserve('dear-' + where, {[SALES]: 500000000}, 'bot-a'); // past its capacity
  // A reserve waiting, so that the waiting column has a value and an age.
  const queue = 'local:wait:' + where;
  await server.put({key: queue, kind: 'concurrency', capacity: 1, timeout_seconds: 300});
  await server.reserve('holder-' + where, {[queue]: 1}, 'bot-holder');
  const waiting = server.ok('POST', '/v1/reserve', {
    lease_id: 'waiter-' + where, wait_ms: 60000, requirements: [{key: queue, amount: 1}]});
  waiting.catch(() => {}); // awaited below; a failed check must not leave it unhandled
  await page.evaluate((hash) => { window.location.hash = hash; }, '#limit=' + encodeURIComponent(SLOTS));
  await page.waitForFunction((linked, k) => {
    const row = document.querySelector('#limits-body .lrow.linked');
    const queued = [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === k);
    return row !== null && row.dataset.key === linked && queued !== undefined &&
           queued.querySelector('.c-waiting').dataset.value === '1';
  }, {timeout: 20000}, SLOTS, queue);
  await nextRefresh(page);
  const unreadable = await unreadableText(page);
  equal(JSON.stringify(unreadable), '[]', 'text cut off or under a shadow (' + where + ')');
  const labels = await unlabelledCells(page);
  equal(JSON.stringify(labels.wrong), '[]', 'values without their column\'s label (' + where + ')');
  const breaks = await callerBreaks(page);
  equal(JSON.stringify(breaks.wrong), '[]', 'callers and lease ids break only after ' +
        'punctuation (' + where + ')');
  check(breaks.shown > 0, 'callers are shown (' + where + ')');
  await moneyInDollars(server, page, where);
  await denialsAgree(page, where);
  await server.ok('POST', '/v1/release', {lease_id: 'holder-' + where});
  equal((await waiting).allowed, true, 'the waiter was admitted (' + where + ')');
  await server.ok('POST', '/v1/release', {lease_id: 'waiter-' + where});
}

async function phoneWidth(page) {
  await page.setViewport({width: 390, height: 844, isMobile: true, hasTouch: true});
  await nextRefresh(page);
  const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(widths[0] <= widths[1], 'nothing wider than the phone: ' + widths.join(' > '));
  const visible = await page.evaluate(() => {
    const row = document.querySelector('#limits-body .lrow');
    const box = row.getBoundingClientRect();
    return box.width > 0 && box.right <= window.innerWidth;
  });
  check(visible, 'the limits fit the width');
  await keysWrapAtColons(page, 'phone');
}

// A screenshot of the whole page, taken with a viewport as tall as the page:
// rows off screen are skipped by the browser (content-visibility), and a
// shot beyond the viewport can show them blank.
async function wholePageShot(page, file) {
  const viewport = page.viewport();
  const height = await page.evaluate(() => {
    window.scrollTo(0, 0);
    return document.documentElement.scrollHeight;
  });
  await page.setViewport({...viewport, height});
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() =>
    requestAnimationFrame(resolve))));
  await page.screenshot({path: path.join(OUT, file)});
  await page.setViewport(viewport);
}

const READS_WELL = 'no text cut off or under the linked row\'s bar, every value labelled, ' +
  'callers broken only after punctuation, money in dollars in the denials and budgets, and the ' +
  'denial figures agree with the last minute\'s count';

async function mainScenario(browser) {
  const server = await new Server(['--test-clock', '--alert-scan-ms', '100']).start();
  try {
    await workload(server);
    const page = await newPage(browser, 1400, 1000);
    await page.goto(server.url + '/console');
    await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
    await run('page_matches_api', 'every limit\'s figures on the page equal GET /v1/console/limits ' +
              'and GET /v1/usage/{key}; money in dollars and usd_micros',
              () => pageMatchesApi(server, page));
    await run('budget_card_matches_api', 'a budget card shows the spend API\'s figures, its samples, ' +
              'the projection and the top callers', () => budgetsMatchApi(server, page));
    await run('hostile_key_is_text', 'a key and a caller made of markup render as text; nothing ' +
              'runs', () => hostileRendersAsText(server, page));
    await run('attention_names_problems', 'the first panel names the used-up limit, the debt, ' +
              'the denials and a fired alert', () => attentionNamesProblems(page));
    await run('keys_wrap_at_colons', 'a key wraps only after a colon, never inside a word',
              () => keysWrapAtColons(page, 'desktop'));
    await run('new_reserve_shows_up', 'a reserve made after the page loaded shows up without a ' +
              'reload', () => newReserveShowsUp(server, page));
    await run('detail_shows_holders', 'a limit\'s detail lists who holds it, as the API says',
              () => detailShowsHolders(server, page));
    await run('waiters_show_up', 'a reserve waiting on a limit shows as a waiter with its age, ' +
              'as the API says, and leaves once admitted', () => waitersShowUp(server, page));
    await run('periods_in_local_time', 'a zoned budget\'s period shows in its local time as ' +
              'GET /v1/usage says, in the table and the detail; a prepaid one never resets',
              () => periodsInLocalTime(server, page));
    await run('reads_well_desktop', READS_WELL + ' (1400 px)',
              () => readsWell(server, page, 'desktop'));
    await wholePageShot(page, 'console-desktop-' + BACKEND + '.png');
    await run('phone_width', 'the page fits a phone\'s width (390 px)', () => phoneWidth(page));
    await run('reads_well_phone', READS_WELL + ' (390 px)', () => readsWell(server, page, 'phone'));
    await wholePageShot(page, 'console-phone-' + BACKEND + '.png');
    await run('console_clean', 'the browser console logged no error or warning', async () => {
      const problems = consoleProblems(page);
      equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
    });
    await page.close();
  } finally {
    await server.stop();
  }
}

// ---- scenario: the spend rate and an overrun -------------------------------------

const OVER = 'team:over:usd:month';
const IDLE = 'team:idle:usd:month';

// Dollars as the page writes them, for the whole-cent amounts used here.
const usd = (micros) => '$' + (micros / 1000000).toFixed(2);

// The spend API's answer once a sample shows `spent` (the server samples
// by itself; this waits for it, it does not time it).
async function waitForSpent(server, key, spent) {
  for (let i = 0; i < 200; i++) {
    const answer = await server.ok('GET', '/v1/console/spend/' + encodeURIComponent(key));
    if (answer.points.some((p) => p.spent === spent)) return answer;
    await sleep(100);
  }
  throw new Error('no spend sample of ' + key + ' at ' + spent);
}

// A budget card as drawn: its figures, the projection the page was given
// (data attributes) and told (text), and its caller rows.
function budgetCardOf(page, key) {
  return page.evaluate((k) => {
    const node = [...document.querySelectorAll('#budgets .card')].find((c) => c.dataset.key === k);
    if (!node) return null;
    const spent = node.querySelector('[data-figure="spent"] dd');
    const projection = node.querySelector('.projection-text');
    return {spent: spent.dataset.value, spentText: spent.firstChild.textContent,
            text: projection.textContent, data: {...projection.dataset},
            callers: [...node.querySelectorAll('tr[data-caller]')].map((tr) => ({
              caller: tr.dataset.caller, value: tr.children[1].dataset.value,
              text: tr.children[1].firstChild.textContent}))};
  }, key);
}

const attentionOf = (page) => page.evaluate(() => [...document.querySelectorAll('#attention li')]
  .map((li) => ({kind: li.dataset.kind, text: li.textContent,
                 key: li.querySelector('.key') ? li.querySelector('.key').textContent : ''})));

const spendOf = (server, key) => server.ok('GET', '/v1/console/spend/' + encodeURIComponent(key));

async function overrunCallersIncludeDebt(server, page) {
  const spend = await spendOf(server, OVER);
  equal(spend.spent, 5600000, 'the overrun is spent');
  equal(spend.debt, 600000, '... $0.60 of it as debt');
  const callers = (await server.ok('GET', '/v1/usage/' + encodeURIComponent(OVER) +
                                   '?group_by=caller')).callers;
  equal(JSON.stringify(callers[0]), JSON.stringify({caller: 'bot-over', reserved: 0, used: 5000000,
                                                    debt: 600000, spent: 5600000, calls: 1}),
        'the API\'s caller row carries the debt and what was spent');
  equal(callers.reduce((sum, c) => sum + c.spent, 0), spend.spent, 'the callers\' spend adds up');
  const card = await budgetCardOf(page, OVER);
  if (!check(card !== null, 'a card for ' + OVER)) return;
  equal(card.spentText, '$5.60', 'the card says what was spent');
  equal(card.callers.length, 1, 'one caller row');
  equal(card.callers[0].value, String(callers[0].spent), 'the caller row\'s spend is the API\'s');
  equal(card.callers[0].text, card.spentText, 'the only caller spent what the card says');
}

async function rateIsRecentSpend(server, page) {
  const over = await spendOf(server, OVER);
  const idle = await spendOf(server, IDLE);
  for (const [s, spent] of [[over, 5600000], [idle, 7400000]]) {
    equal(s.rate_window_spent, spent, s.key + ': everything was spent in the rate\'s window');
    check(s.rate_window_ms >= RATE_WINDOW_MS, s.key + ': the window is at least 10 min: ' +
          s.rate_window_ms);
    equal(s.rate_per_hour, Math.floor(spent * 3600000 / s.rate_window_ms), s.key + ': the rate');
  }
  // $2.60 left at $7.40 per 10 min.
  const left = Math.ceil(2600000 * idle.rate_window_ms / 7400000);
  equal(idle.runs_out_at_unix_ms - idle.now_unix_ms, left, 'when the idle budget would run out');
  const overCard = await budgetCardOf(page, OVER);
  const idleCard = await budgetCardOf(page, IDLE);
  if (!check(overCard !== null && idleCard !== null, 'both cards')) return;
  equal(overCard.data.ratePerHour, String(over.rate_per_hour), 'the page has the API\'s rate');
  check(overCard.text.includes(usd(over.rate_per_hour) + ' per hour'),
        'the page tells the rate: ' + overCard.text);
  check(overCard.text.includes(usd(5600000) + ' in the last 10 m'),
        'the page tells what was spent in the window: ' + overCard.text);
  equal(idleCard.data.runsOutInMs, String(left), 'the page has the API\'s run-out time');
  const attention = await attentionOf(page);
  check(attention.some((a) => a.kind === 'runs-out' && a.key === IDLE),
        'spending fast, the idle budget is named: ' + JSON.stringify(attention));
}

async function idleBudgetDoesNotRunOut(server, page) {
  const idle = await spendOf(server, IDLE);
  equal(idle.rate_window_spent, 0, 'nothing spent in the last 10 min');
  equal(idle.rate_per_hour, 0, 'the rate is zero');
  equal(idle.runs_out_at_unix_ms, null, 'it does not run out');
  equal(idle.projected_at_period_end, idle.spent, 'it ends the period where it is');
  const card = await budgetCardOf(page, IDLE);
  if (!check(card !== null, 'a card for ' + IDLE)) return;
  equal(card.data.ratePerHour, '0', 'the page has a zero rate');
  equal(card.data.runsOutInMs, '', 'the page has no run-out time');
  check(/does not run out/.test(card.text), 'the page says so: ' + card.text);
  // The window reaches back to the newest sample at least 10 min old: here
  // the one before the clock moved, so a little longer.
  check(card.text.startsWith('Spent $0.00 in the last '), 'the page says why: ' + card.text);
  const attention = await attentionOf(page);
  check(!attention.some((a) => a.kind === 'runs-out'),
        'no budget said to run out: ' + JSON.stringify(attention));
  check(attention.some((a) => a.kind === 'out' && a.key === OVER), 'the overrun one is used up');
}

async function spendScenario(browser) {
  const server = await new Server(['--test-clock']).start();
  try {
    await server.put({key: OVER, kind: 'budget', capacity: 5000000, period: 'month',
                      timeout_seconds: 300, unit: 'usd_micros'});
    await server.put({key: IDLE, kind: 'budget', capacity: 10000000, period: 'month',
                      timeout_seconds: 300, unit: 'usd_micros'});
    // The scenario stays in one month of the server's clock.
    const usage = await server.ok('GET', '/v1/usage/' + encodeURIComponent(IDLE));
    const now = (await server.ok('GET', '/v1/console/status')).now_unix_ms;
    if (usage.period_end_unix_ms - now < 3600000) {
      await server.advance(usage.period_end_unix_ms - now + 1000);
    }
    // An overrun right after the budget was made (before the server sampled
    // it, most likely): $5 reserved, $5.60 spent.
    await server.reserve('over-1', {[OVER]: 5000000}, 'bot-over');
    await server.complete('over-1', {[OVER]: 5600000});
    // Sampled at zero, then $7.40 of $10 at once, then nothing.
    await waitForSpent(server, IDLE, 0);
    await server.reserve('idle-1', {[IDLE]: 7400000}, 'bot-idle');
    await server.complete('idle-1', {[IDLE]: 7400000});
    await waitForSpent(server, OVER, 5600000);
    await waitForSpent(server, IDLE, 7400000);
    await server.advance(75000);
    const page = await newPage(browser, 1400, 1000);
    await page.goto(server.url + '/console');
    await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
    await nextRefresh(page);
    await run('overrun_callers_include_debt', 'after an overrun the caller rows carry the debt: ' +
              'what each caller spent adds up to what the budget spent',
              () => overrunCallersIncludeDebt(server, page));
    await run('rate_is_recent_spend', '75 s after a charge the rate is what was spent in the ' +
              'last 10 min, as the API says', () => rateIsRecentSpend(server, page));
    await page.screenshot({path: path.join(OUT, 'console-spend-' + BACKEND + '.png'),
                           fullPage: true});
    await server.advance(RATE_WINDOW_MS + 60000);
    await nextRefresh(page);
    await run('idle_budget_does_not_run_out', 'a budget that spent nothing in the last 10 min ' +
              'has a zero rate and does not run out', () => idleBudgetDoesNotRunOut(server, page));
    await run('spend_console_clean', 'the browser console logged no error or warning', async () => {
      const problems = consoleProblems(page);
      equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
    });
    await page.close();
  } finally {
    await server.stop();
  }
}

// ---- scenario: a link to one limit -------------------------------------------------

const LINKED = 'team:a/b?c%d#e&limit=x:rpm'; // characters a URL fragment must encode
const fragmentOf = (key) => '#limit=' + encodeURIComponent(key);

const selectedOf = (page) => page.evaluate(() => {
  const row = document.querySelector('#limits-body .lrow.selected');
  return {key: row ? row.dataset.key : null,
          linked: row ? row.classList.contains('linked') : false,
          detail: document.getElementById('detail-panel').hidden ? null
            : document.getElementById('detail-key').textContent,
          link: document.getElementById('detail-link').getAttribute('href'),
          hash: window.location.hash,
          rows: document.querySelectorAll('#limits-body .lrow').length};
});

// Whether the row of key comes to be marked and in view (it is marked at
// once, and scrolled to once the page has drawn).
function scrolledTo(page, key) {
  return page.waitForFunction((k) => {
    const row = document.querySelector('#limits-body .lrow.selected');
    if (row === null || row.dataset.key !== k) return false;
    const box = row.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= window.innerHeight;
  }, {timeout: 15000}, key).then(() => true, () => false);
}

async function typeFilter(page, text) {
  await page.click('#filter', {clickCount: 3});
  await page.keyboard.press('Backspace');
  if (text !== '') await page.type('#filter', text);
}

async function linkOpensLimit(server, browser) {
  const page = await newPage(browser, 1200, 800);
  await page.goto(server.url + '/console' + fragmentOf(LINKED));
  await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
  check(await scrolledTo(page, LINKED), 'the linked limit is highlighted and scrolled into view');
  let seen = await selectedOf(page);
  equal(seen.key, LINKED, 'the linked limit is the one highlighted');
  check(seen.linked, 'and marked as the one the link names');
  equal(seen.detail, LINKED, 'its detail is open');
  equal(seen.link, fragmentOf(LINKED), 'the detail links to itself');
  equal(seen.hash, fragmentOf(LINKED), 'the address still names it');
  // The filter still filters, and the link does not come back over it.
  await typeFilter(page, 'a:filler:0');
  await page.waitForFunction(() => document.querySelectorAll('#limits-body .lrow').length === 10,
                             {timeout: 15000});
  await nextRefresh(page);
  seen = await selectedOf(page);
  equal(seen.rows, 10, 'the filter shows the matching limits only');
  equal(seen.key, null, 'the linked limit is filtered out');
  await typeFilter(page, '');
  await page.waitForFunction(() => document.querySelectorAll('#limits-body .lrow').length === 63,
                             {timeout: 15000});
  // Choosing a limit puts it in the address; a new fragment opens its limit.
  await page.evaluate(() => {
    [...document.querySelectorAll('#limits-body .lrow')].find((r) => r.dataset.key === 'z:last').click();
  });
  seen = await selectedOf(page);
  equal(seen.hash, fragmentOf('z:last'), 'a chosen limit is in the address');
  equal(seen.link, fragmentOf('z:last'), 'and in the detail\'s link');
  await page.evaluate((hash) => { window.location.hash = hash; }, fragmentOf('a:filler:30'));
  check(await scrolledTo(page, 'a:filler:30'), 'a fragment set later scrolls to its limit too');
  await nextRefresh(page);
  seen = await selectedOf(page);
  equal(seen.detail, 'a:filler:30', 'and opens its detail');
  const problems = consoleProblems(page);
  equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
  await page.close();
}

async function hostileLinkIsText(server, browser) {
  const page = await newPage(browser, 1200, 800);
  await page.goto(server.url + '/console' + fragmentOf(HOSTILE_KEY));
  await page.waitForFunction(() => !document.getElementById('detail-panel').hidden,
                             {timeout: 15000});
  const seen = await page.evaluate(() => ({
    detail: document.getElementById('detail-key').textContent,
    images: document.querySelectorAll('img').length, pwned: window.__pwned !== undefined}));
  equal(seen.detail, HOSTILE_KEY, 'the hostile key from the address shows as text');
  equal(seen.images, 0, 'no <img> made from it');
  equal(seen.pwned, false, 'nothing ran');
  equal(page.dialogs.length, 0, 'no dialog');
  // A fragment that is not a key: ignored, nothing breaks.
  await page.goto(server.url + '/console#limit=%E0%A4%A');
  await page.reload();
  await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
  await nextRefresh(page);
  equal(await page.evaluate(() => document.getElementById('detail-panel').hidden), true,
        'a malformed fragment opens nothing');
  const problems = consoleProblems(page);
  equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
  await page.close();
}

async function linkScenario(browser) {
  const server = await new Server([]).start();
  try {
    for (let i = 0; i < 60; i++) {
      await server.put({key: 'a:filler:' + String(i).padStart(2, '0'), kind: 'rolling',
                        capacity: 10, window_seconds: 60});
    }
    for (const key of [LINKED, 'z:last', HOSTILE_KEY]) {
      await server.put({key, kind: 'rolling', capacity: 10, window_seconds: 60});
    }
    await run('link_opens_limit', 'a #limit=<key> address scrolls to that limit, highlights it ' +
              'and opens it; the filter keeps working; choosing a limit puts it in the address',
              () => linkOpensLimit(server, browser));
    await run('hostile_link_is_text', 'a hostile key in the address shows as text; a malformed ' +
              'fragment is ignored', () => hostileLinkIsText(server, browser));
  } finally {
    await server.stop();
  }
}

// ---- scenario: tokens ------------------------------------------------------------

const CLIENT_TOKEN = 'client-' + Math.random().toString(36).slice(2);
const ADMIN_TOKEN = 'admin-' + Math.random().toString(36).slice(2);

async function submitToken(page, token) {
  await page.evaluate(() => { document.getElementById('token-panel').hidden = false; });
  await page.click('#token-input', {clickCount: 3});
  await page.type('#token-input', token);
  await page.click('#token-use');
}

async function figuresShown(page) {
  return page.evaluate(() => ({
    rows: document.querySelectorAll('#limits-body .lrow').length,
    reserves: document.getElementById('reserves-10s').textContent,
    cards: document.querySelectorAll('#budgets .card').length,
    banner: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
    denials: document.querySelectorAll('#denials tbody tr').length,
    denialsNote: document.getElementById('denials-note').textContent,
    keysNote: document.getElementById('keys-note').textContent,
    newKey: document.getElementById('key-new').disabled,
  }));
}

async function tokenScenario(browser) {
  const server = await new Server([], {LLMLIMIT_CLIENT_TOKEN: CLIENT_TOKEN,
                                       LLMLIMIT_ADMIN_TOKEN: ADMIN_TOKEN}).start();
  try {
    await server.put({key: SALES, kind: 'budget', capacity: 1000, period: 'month',
                      unit: 'usd_micros'}, ADMIN_TOKEN);
    await server.reserve('t-1', {[SALES]: 2000}, 'bot-x', CLIENT_TOKEN); // exceeds: a denial
    const page = await newPage(browser, 1200, 900);
    await page.goto(server.url + '/console');
    await run('token_asked_for', 'without a token the page says one is needed and shows no data',
              async () => {
                await page.waitForFunction(() => document.body.dataset.state === 'unauthorized',
                                           {timeout: 15000});
                const shown = await figuresShown(page);
                check(/needs a token/.test(shown.banner), 'the banner asks for a token: ' + shown.banner);
                equal(shown.rows, 0, 'no limits');
              });
    await run('wrong_token_shows_error', 'a wrong token shows an error and no data', async () => {
      await submitToken(page, 'wrong-' + CLIENT_TOKEN);
      await page.waitForFunction(() => /refused/.test(document.getElementById('error').textContent),
                                 {timeout: 15000});
      const shown = await figuresShown(page);
      equal(shown.rows, 0, 'no limits');
      equal(shown.cards, 0, 'no budgets');
      equal(shown.reserves, '–', 'no throughput');
      await page.screenshot({path: path.join(OUT, 'console-wrong-token-' + BACKEND + '.png')});
    });
    await run('client_token_shows_data', 'the client token shows the limits; who was denied ' +
              'needs the admin token', async () => {
      await submitToken(page, CLIENT_TOKEN);
      await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 15000});
      const shown = await figuresShown(page);
      equal(shown.rows, 1, 'the limit');
      equal(shown.banner, '', 'no error');
      equal(shown.denials, 0, 'no denial rows');
      check(/admin token/.test(shown.denialsNote), 'the denials say why: ' + shown.denialsNote);
      check(/admin token/.test(shown.keysNote), 'the keys say why: ' + shown.keysNote);
      equal(shown.newKey, true, 'New key is off');
    });
    await run('admin_token_shows_denials', 'the admin token shows who was denied and the keys; ' +
              'a key made in the page with it is listed', async () => {
      await submitToken(page, ADMIN_TOKEN);
      await page.waitForFunction(() => document.querySelectorAll('#denials tbody tr').length > 0,
                                 {timeout: 15000});
      const shown = await figuresShown(page);
      check(/^No key yet/.test(shown.keysNote), 'the keys are listed: ' + shown.keysNote);
      equal(shown.newKey, false, 'New key is on');
      await page.click('#key-new');
      await page.type('#key-caller', 'token-bot');
      await page.type('#key-team', 'ops');
      await page.click('#key-create');
      await page.waitForFunction(() => document.querySelectorAll('#keys tbody tr').length === 1 &&
                                 !document.getElementById('key-secret').hidden, {timeout: 15000});
      const listed = await server.ok('GET', '/v1/admin/keys', undefined, ADMIN_TOKEN);
      equal(listed.keys.length === 1 ? listed.keys[0].caller : null, 'token-bot', 'made with the token');
    });
    await run('token_never_in_urls_or_logs', 'the token is in no request URL and no log line',
              async () => {
                for (const token of [CLIENT_TOKEN, ADMIN_TOKEN]) {
                  check(!page.requests.some((u) => u.includes(token)), 'a URL carries the token');
                  check(!server.stderr.includes(token), 'the server logged the token');
                }
                check(page.requests.length > 0, 'requests were seen');
              });
    await run('token_console_clean', 'the console logged nothing but the refused requests (401)',
              async () => {
                const problems = consoleProblems(page, /status of 401/);
                equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
              });
    await page.close();
  } finally {
    await server.stop();
  }
}

// ---- scenario: the keys panel ------------------------------------------------------

// A caller and metadata made of markup: valid (printable ASCII, no white
// space in a caller), so the page must show them as text.
const HOSTILE_KEY_CALLER = '<img/src=x/onerror=window.__pwned=1>';
const HOSTILE_METADATA = '<script>window.__pwned=2</script> <b>bold</b>';
const GATEWAY_MODEL = 'm-one';

// The gateway's fake upstream (tests/gateway/fake_upstream.py, Python's
// standard library only): real HTTP, deterministic answers and usage.
function startFakeUpstream(dir) {
  const script = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'gateway',
                           'fake_upstream.py');
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [script, '--port', '0', '--log', path.join(dir, 'upstream.log')],
                        {stdio: ['ignore', 'pipe', 'inherit']});
    let out = '';
    const timer = setTimeout(() => reject(new Error('fake_upstream did not start')), 10000);
    child.on('error', reject);
    child.stdout.on('data', (chunk) => {
      out += chunk.toString();
      const match = /fake_upstream listening on ([0-9.]+):([0-9]+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({child, url: 'http://' + match[1] + ':' + match[2] + '/v1'});
      }
    });
  });
}

// gateway.json with one model on the fake upstream and one key of its own
// (listed, read-only); the others come from the API.
function gatewayConfig(dir, upstreamUrl) {
  const file = path.join(dir, 'gateway-console.json');
  fs.writeFileSync(file, JSON.stringify({
    upstreams: [{name: 'fake', base_url: upstreamUrl, api_key_env: 'CONSOLE_TEST_PROVIDER_KEY'}],
    models: [{name: GATEWAY_MODEL, upstream: 'fake', input_usd_micros_per_mtok: 1000000,
              output_usd_micros_per_mtok: 2000000, max_output_tokens: 1000,
              default_max_output_tokens: 100}],
    keys: [{sha256: crypto.createHash('sha256').update('llk-file-' + Math.random()).digest('hex'),
            caller: 'file-bot', team: 'ops'}],
    limits: [{key: 'team:{team}:usd:month', amount: 'usd_micros'}]}));
  return file;
}

// What the gateway says to a call with a secret: its status and error code.
async function gatewayAnswer(server, secret) {
  const response = await fetch(server.url + '/v1/models',
                               {headers: {Authorization: 'Bearer ' + secret}});
  const body = await response.json().catch(() => null);
  return {status: response.status,
          code: body && body.error && typeof body.error === 'object' ? body.error.code : null};
}

// Each key row of the panel: its id and each cell's text.
const keyRowsOf = (page) => page.evaluate(() => [...document.querySelectorAll('#keys tbody tr')]
  .map((tr) => {
    const cells = {};
    for (const td of tr.querySelectorAll('td')) cells[td.classList[0].slice(2)] = td.textContent;
    return {id: tr.dataset.id, cells, buttons: [...tr.querySelectorAll('button')].map((b) => b.textContent)};
  }));

async function keyRowOf(page, id) {
  return (await keyRowsOf(page)).find((r) => r.id === id);
}

// Waits until the row of key id satisfies test (run in the page on its status text).
async function waitForKeyStatus(page, id, pattern) {
  await page.waitForFunction((k, source) => {
    const tr = [...document.querySelectorAll('#keys tbody tr')].find((r) => r.dataset.id === k);
    return tr !== undefined && new RegExp(source).test(tr.querySelector('.k-status').textContent);
  }, {timeout: 20000}, id, pattern.source);
}

const clickKeyButton = (page, id, action) =>
  page.click('#keys tbody tr[data-id="' + id + '"] button[data-action="' + action + '"]');

async function waitForSecret(page, other) {
  await page.waitForFunction((old) => !document.getElementById('key-secret').hidden &&
    /^llk-/.test(document.getElementById('key-secret-value').value) &&
    document.getElementById('key-secret-value').value !== old, {timeout: 20000}, other || '');
  return page.$eval('#key-secret-value', (input) => input.value);
}

async function keysListed(server, page) {
  const listed = await server.ok('GET', '/v1/admin/keys?limit=1000');
  await page.waitForFunction((n) => document.querySelectorAll('#keys tbody tr').length === n,
                             {timeout: 20000}, listed.keys.length);
  const rows = await keyRowsOf(page);
  equal(rows.length, 3, 'the keys made through the API and gateway.json\'s');
  for (const k of listed.keys) {
    const row = rows.find((r) => r.id === k.id);
    if (!check(row !== undefined, 'a row for ' + k.id)) continue;
    equal(row.cells.caller, k.caller, 'the caller of ' + k.id);
    equal(row.cells.team, k.team, 'the team of ' + k.id);
    equal(row.cells.status, 'active', 'the status of ' + k.id);
    equal(row.cells.models, k.models === null ? 'every model' : k.models.join(', '), 'models');
    equal(row.cells.last, 'never', 'last use of ' + k.id);
    // Nothing was spent yet: $0.00 this month in the team's budget (the
    // template team:{team}:usd:month); sales and red have no such budget.
    equal(row.cells.spent, k.team === 'ops' ? '$0.00 this month of ' + KEYS_BUDGET : 'no budget',
          'the spend of ' + k.id);
    equal(JSON.stringify(row.buttons), k.source === 'file' ? '[]' : '["Block","Rotate","Revoke"]',
          'the actions of ' + k.id);
  }
}

async function keysHostileAsText(page) {
  const shown = await page.evaluate(() => ({
    pwned: window.__pwned === undefined ? null : window.__pwned,
    images: document.querySelectorAll('#keys-panel img, #keys-panel script, #keys-panel b').length,
    callers: [...document.querySelectorAll('#keys .k-caller')].map((td) => td.textContent),
    metadata: [...document.querySelectorAll('#keys .k-metadata')].map((td) => td.textContent),
  }));
  equal(shown.pwned, null, 'no script ran');
  equal(shown.images, 0, 'no element made from a caller or metadata');
  check(shown.callers.includes(HOSTILE_KEY_CALLER), 'the hostile caller as text: ' + shown.callers);
  check(shown.metadata.includes('note: ' + HOSTILE_METADATA), 'the metadata as text: ' + shown.metadata);
}

async function createShowsSecretOnce(server, page, browser) {
  await page.click('#key-new');
  await page.type('#key-caller', 'form-bot');
  await page.type('#key-team', 'ops');
  await page.type('#key-models', 'no-such-model');
  await page.click('#key-create');
  await page.waitForFunction(() => !document.getElementById('key-message').hidden, {timeout: 20000});
  const refused = await page.$eval('#key-message', (m) => m.textContent);
  check(/^llmlimitd answered 400: models: /.test(refused), 'an unknown model is refused: ' + refused);
  equal((await server.ok('GET', '/v1/admin/keys?caller=form-bot')).keys.length, 0,
        'a refused create makes nothing');
  equal(await page.$eval('#key-secret', (box) => box.hidden), true, 'and shows no secret');
  await page.click('#key-models', {clickCount: 3});
  await page.type('#key-models', GATEWAY_MODEL);
  await page.click('#key-create');
  const secret = await waitForSecret(page);
  const made = (await server.ok('GET', '/v1/admin/keys?caller=form-bot')).keys;
  equal(made.length, 1, 'the form made one key');
  equal(JSON.stringify(made[0].models), JSON.stringify([GATEWAY_MODEL]), 'with its models');
  equal(made[0].team, 'ops', 'and its team');
  equal((await gatewayAnswer(server, secret)).status, 200, 'the secret shown works on the gateway');
  const what = await page.$eval('#key-secret-what', (p) => p.textContent);
  check(what.includes(made[0].id), 'the secret names its key: ' + what);
  equal(await page.$eval('#key-message', (m) => m.hidden), true, 'the refusal is gone');
  await browser.defaultBrowserContext().overridePermissions(server.url,
    ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
  await page.click('#key-secret-copy');
  await page.waitForFunction(() => document.getElementById('key-secret-copy').textContent !== 'Copy',
                             {timeout: 5000});
  equal(await page.evaluate(() => navigator.clipboard.readText()), secret, 'Copy put the secret on the clipboard');
  await page.waitForFunction((id) => [...document.querySelectorAll('#keys tbody tr')]
    .some((r) => r.dataset.id === id), {timeout: 20000}, made[0].id);
  await page.reload();
  await page.waitForFunction((id) => [...document.querySelectorAll('#keys tbody tr')]
    .some((r) => r.dataset.id === id), {timeout: 20000}, made[0].id);
  const after = await page.evaluate(() => ({
    hidden: document.getElementById('key-secret').hidden,
    value: document.getElementById('key-secret-value').value,
    html: document.documentElement.outerHTML}));
  equal(after.hidden, true, 'no secret shown after a reload');
  equal(after.value, '', 'no secret in the page after a reload');
  check(!after.html.includes(secret), 'the secret is nowhere in the page after a reload');
  return {id: made[0].id, secret};
}

async function blockRefusesKey(server, page, key) {
  await clickKeyButton(page, key.id, 'block');
  await waitForKeyStatus(page, key.id, /^blocked$/);
  equal((await server.ok('GET', '/v1/admin/keys/' + key.id)).status, 'blocked', 'the API says blocked');
  const refused = await gatewayAnswer(server, key.secret);
  equal(refused.status, 401, 'the gateway refuses the blocked key');
  equal(refused.code, 'key_blocked', 'saying why');
  await page.waitForFunction((id) => {
    const tr = [...document.querySelectorAll('#keys tbody tr')].find((r) => r.dataset.id === id);
    return tr && tr.querySelector('button[data-action="unblock"]') !== null;
  }, {timeout: 20000}, key.id);
  await clickKeyButton(page, key.id, 'unblock');
  await waitForKeyStatus(page, key.id, /^active$/);
  equal((await gatewayAnswer(server, key.secret)).status, 200, 'unblocked, the key works again');
  // A call charged through the gateway: the key's spend is its caller's.
  const call = await fetch(server.url + '/v1/chat/completions', {method: 'POST',
    headers: {'Authorization': 'Bearer ' + key.secret, 'Content-Type': 'application/json'},
    body: JSON.stringify({model: GATEWAY_MODEL, messages: [{role: 'user', content: 'one two three'}]})});
  equal(call.status, 200, 'a chat call with the key');
  await call.text();
  const spent = await callerSpent(server, KEYS_BUDGET, 'form-bot');
  check(spent > 0, 'the call was charged to the team\'s budget: ' + spent);
  const text = dollars(spent) + ' this month of ' + KEYS_BUDGET;
  await waitForKeySpent(page, key.id, text);
  const row = await keyRowOf(page, key.id);
  equal(row.cells.spent, text, 'the key\'s spend is its caller\'s in the budget this period');
  check(/ago$/.test(row.cells.last), 'its last use is shown: ' + row.cells.last);
}

const KEYS_BUDGET = 'team:ops:usd:month'; // the ops team's, from team:{team}:usd:month

// usd_micros as the page writes dollars: $1 is 1,000,000, at least 2 decimals.
function dollars(micros) {
  let fraction = String(micros % 1000000).padStart(6, '0').replace(/0+$/, '');
  if (fraction.length < 2) fraction = fraction.padEnd(2, '0');
  return '$' + Math.floor(micros / 1000000).toLocaleString('en-US') + '.' + fraction;
}

// What caller spent (used + debt) in budget this period, as the API says.
async function callerSpent(server, budget, caller) {
  const usage = await server.ok('GET', '/v1/usage/' + encodeURIComponent(budget) + '?group_by=caller');
  const row = usage.callers.find((c) => c.caller === caller);
  return row === undefined ? 0 : row.spent;
}

async function waitForKeySpent(page, id, text) {
  await page.waitForFunction((k, t) => {
    const tr = [...document.querySelectorAll('#keys tbody tr')].find((r) => r.dataset.id === k);
    return tr && tr.querySelector('.k-spent').textContent === t;
  }, {timeout: 20000}, id, text).catch(() => {});
}

async function gatewayCall(server, secret, content) {
  const call = await fetch(server.url + '/v1/chat/completions', {method: 'POST',
    headers: {'Authorization': 'Bearer ' + secret, 'Content-Type': 'application/json'},
    body: JSON.stringify({model: GATEWAY_MODEL, messages: [{role: 'user', content}]})});
  await call.text();
  return call.status;
}

// A second key of another caller of the same team spends more: each key
// shows its own caller's spend this period, as the budget's usage by
// caller says, the budget's period in the title; the rows of the team add
// up to the budget's spend.
async function keySpendThisPeriod(server, page, keys) {
  if (keys.other === undefined) {
    const made = await server.request('POST', '/v1/admin/keys', {caller: 'ops-two', team: 'ops'});
    equal(made.status, 201, 'a second key of the ops team');
    keys.other = made.body;
    for (const content of ['a longer question, with more words in it than the first', 'and one more']) {
      equal(await gatewayCall(server, keys.other.secret, content), 200, 'a call of the second key');
    }
  }
  const usage = await server.ok('GET', '/v1/usage/' + encodeURIComponent(KEYS_BUDGET));
  let sum = 0;
  for (const [id, caller] of [[keys.form.id, 'form-bot'], [keys.other.id, 'ops-two'],
                              [keys.file.id, 'file-bot']]) {
    const spent = await callerSpent(server, KEYS_BUDGET, caller);
    sum += spent;
    const text = dollars(spent) + ' this month of ' + KEYS_BUDGET;
    await waitForKeySpent(page, id, text);
    equal((await keyRowOf(page, id)).cells.spent, text, 'the spend this period of ' + caller);
    const title = await page.$eval('#keys tbody tr[data-id="' + id + '"] .k-spent', (td) => td.title);
    check(title.includes(usage.period_start_local + ' to ' + usage.period_end_local),
          'the title gives the period: ' + title);
  }
  check(await callerSpent(server, KEYS_BUDGET, 'ops-two') !== await callerSpent(server, KEYS_BUDGET, 'form-bot'),
        'the two callers spent different amounts');
  equal(sum, usage.used + usage.debt, 'the ops keys add up to the budget\'s spend');
  equal((await keyRowOf(page, keys.salesId)).cells.spent, 'no budget', 'a key with no budget says so');
}

// Moved past the month's end, every key shows $0.00 for the new month,
// while the gateway's counters since start still hold what was charged.
async function keySpendNewPeriod(server, page, keys) {
  const before = await server.ok('GET', '/v1/usage/' + encodeURIComponent(KEYS_BUDGET));
  const status = await server.ok('GET', '/v1/console/status');
  await server.advance(before.period_end_unix_ms - status.now_unix_ms + 1000);
  const after = await server.ok('GET', '/v1/usage/' + encodeURIComponent(KEYS_BUDGET));
  equal(after.period_start_unix_ms, before.period_end_unix_ms, 'the clock is in the next month');
  const gateway = await server.ok('GET', '/v1/console/gateway');
  for (const [id, caller] of [[keys.form.id, 'form-bot'], [keys.other.id, 'ops-two']]) {
    const since = gateway.keys.filter((k) => k.caller === caller).reduce((a, k) => a + k.usd_micros, 0);
    check(since > 0, 'since start, ' + caller + ' was charged ' + since);
    equal(await callerSpent(server, KEYS_BUDGET, caller), 0, caller + ' spent nothing this month');
    const text = '$0.00 this month of ' + KEYS_BUDGET;
    await waitForKeySpent(page, id, text);
    equal((await keyRowOf(page, id)).cells.spent, text, 'the new month\'s spend of ' + caller);
    const title = await page.$eval('#keys tbody tr[data-id="' + id + '"] .k-spent', (td) => td.title);
    check(title.includes(after.period_start_local + ' to ' + after.period_end_local),
          'the title gives the new period: ' + title);
  }
}

async function rotateGivesNewSecret(server, page, key) {
  // One past the grace's bound (7 days: KEYS_GRACE_SECONDS_MAX): not sent, nothing rotated.
  await page.$eval('#key-grace', (input) => { input.value = String(7 * 24 * 3600 + 1); });
  await clickKeyButton(page, key.id, 'rotate');
  await page.waitForFunction(() => !document.getElementById('key-message').hidden, {timeout: 5000});
  const refused = await page.$eval('#key-message', (m) => m.textContent);
  equal(refused, 'Not sent: the rotation grace is 0..604800 s', 'a grace past its bound');
  equal((await gatewayAnswer(server, key.secret)).status, 200, 'the key was not rotated');
  await page.$eval('#key-grace', (input) => { input.value = '0'; });
  await clickKeyButton(page, key.id, 'rotate');
  const secret = await waitForSecret(page, key.secret);
  check(secret !== key.secret, 'a new secret');
  equal((await gatewayAnswer(server, secret)).status, 200, 'the new secret works');
  const old = await gatewayAnswer(server, key.secret);
  equal(old.status, 401, 'the old secret (no grace) is refused');
  equal(old.code, 'invalid_api_key', 'as an unknown key');
  await page.click('#key-secret-done');
  equal(await page.$eval('#key-secret-value', (input) => input.value), '', 'Done forgets the secret');
  return {id: key.id, secret};
}

async function revokeRefusesKey(server, page, key) {
  // The key was used (its "last use" changes with every refresh): a refresh
  // rewrites the row's figures, never the button about to be clicked.
  const button = await page.$('#keys tbody tr[data-id="' + key.id + '"] button[data-action="revoke"]');
  const lastUse = await page.$eval('#keys tbody tr[data-id="' + key.id + '"] .k-last', (td) => td.textContent);
  check(lastUse !== 'never', 'the key was used: ' + lastUse);
  await nextRefresh(page);
  await nextRefresh(page);
  check(await button.evaluate((b) => b.isConnected), 'a refresh keeps the row\'s buttons in the page');
  await button.dispose();
  await clickKeyButton(page, key.id, 'revoke');
  await page.waitForFunction((id) => {
    const tr = [...document.querySelectorAll('#keys tbody tr')].find((r) => r.dataset.id === id);
    return tr && /Confirm revoke/.test(tr.textContent);
  }, {timeout: 5000}, key.id);
  equal((await server.ok('GET', '/v1/admin/keys/' + key.id)).status, 'active', 'one click revokes nothing');
  await clickKeyButton(page, key.id, 'revoke');
  await waitForKeyStatus(page, key.id, /^revoked /);
  equal((await server.ok('GET', '/v1/admin/keys/' + key.id)).status, 'revoked', 'the API says revoked');
  const refused = await gatewayAnswer(server, key.secret);
  equal(refused.status, 401, 'the gateway refuses the revoked key');
  equal(refused.code, 'key_revoked', 'saying why');
  await page.waitForFunction((id) => {
    const tr = [...document.querySelectorAll('#keys tbody tr')].find((r) => r.dataset.id === id);
    return tr && tr.querySelectorAll('button').length === 0;
  }, {timeout: 20000}, key.id);
}

async function keysReadWell(page, where) {
  await nextRefresh(page);
  const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(widths[0] <= widths[1], 'nothing wider than the screen (' + where + '): ' + widths.join(' > '));
  const unreadable = (await unreadableText(page)).filter((u) => u.text !== undefined);
  equal(JSON.stringify(unreadable), '[]', 'text cut off (' + where + ')');
  const outside = await page.evaluate(() => [...document.querySelectorAll('#keys tbody tr')]
    .filter((tr) => tr.getBoundingClientRect().right > document.getElementById('keys-panel')
      .getBoundingClientRect().right + 1).length);
  if (where === 'phone') equal(outside, 0, 'every key within the panel on a phone');
}

async function keysFirstPage(server, page) {
  const KEYS_PAGE = 1000;
  const have = (await server.ok('GET', '/v1/admin/keys?limit=1000')).keys.length;
  for (let i = have; i < KEYS_PAGE + 1; i += 50) {
    const batch = [];
    for (let j = i; j < Math.min(i + 50, KEYS_PAGE + 1); j++) {
      batch.push(server.request('POST', '/v1/admin/keys', {caller: 'many-' + j, team: 'many'}));
    }
    for (const answer of await Promise.all(batch)) equal(answer.status, 201, 'a key made');
  }
  await page.waitForFunction((n) => document.querySelectorAll('#keys tbody tr').length === n,
                             {timeout: 30000}, KEYS_PAGE);
  equal(await page.$eval('#keys-count', (c) => c.textContent), '(the first 1,000)', 'the count');
}

async function keysScenario(browser) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-console-gw-'));
  const upstream = await startFakeUpstream(dir);
  let server = null;
  try {
    server = await new Server(['--test-clock', '--gateway-config', gatewayConfig(dir, upstream.url)],
                              {CONSOLE_TEST_PROVIDER_KEY: 'unused'}).start();
    await server.put({key: 'team:ops:usd:month', kind: 'budget', capacity: 100000000,
                      period: 'month', unit: 'usd_micros'});
    const sales = await server.request('POST', '/v1/admin/keys', {caller: 'bot-a', team: 'sales',
                                                                  models: [GATEWAY_MODEL]});
    const keys = {salesId: sales.body.id,
                  file: (await server.ok('GET', '/v1/admin/keys?caller=file-bot')).keys[0]};
    const hostile = await server.request('POST', '/v1/admin/keys', {
      caller: HOSTILE_KEY_CALLER, team: 'red', metadata: {note: HOSTILE_METADATA}});
    equal(hostile.status, 201, 'the hostile key is made');
    const page = await newPage(browser, 1400, 1000);
    await page.goto(server.url + '/console');
    await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
    await run('keys_listed', 'the keys panel lists every key made through the API with its ' +
              'caller, team, status, models, spend and last use', () => keysListed(server, page));
    await run('keys_hostile_as_text', 'a caller and metadata made of markup show as text; ' +
              'nothing runs', () => keysHostileAsText(page));
    let key = null;
    await run('key_create_secret_once', 'New key makes a key with its models; its secret is ' +
              'shown once, copied by Copy, and not after a reload', async () => {
      key = await createShowsSecretOnce(server, page, browser);
    });
    await run('key_block_refused', 'Block shows blocked and the gateway refuses the key ' +
              '(401 key_blocked); Unblock lets it in again', () => blockRefusesKey(server, page, key));
    keys.form = key;
    await run('key_spend_this_period_desktop', 'each key shows its caller\'s spend this month in ' +
              'the team\'s budget, as its usage by caller says, a key of another caller its own ' +
              '(1400 px)', () => keySpendThisPeriod(server, page, keys));
    await run('key_rotate', 'Rotate shows a new secret once; the new one works, the old one ' +
              'not; a grace one past its bound is not sent', async () => { key = await rotateGivesNewSecret(server, page, key); });
    await run('keys_read_well_desktop', 'the keys panel fits and cuts no text (1400 px)',
              () => keysReadWell(page, 'desktop'));
    await wholePageShot(page, 'console-keys-desktop-' + BACKEND + '.png');
    await run('key_revoke', 'a refresh keeps the buttons; Revoke asks once more, then shows revoked, the ' +
              'gateway refuses the key (401 key_revoked) and its actions are gone', () => revokeRefusesKey(server, page, key));
    await page.setViewport({width: 390, height: 844, isMobile: true, hasTouch: true});
    await run('keys_read_well_phone', 'the keys panel fits a phone and cuts no text (390 px)',
              () => keysReadWell(page, 'phone'));
    await run('key_spend_this_period_phone', 'the same spends this month at 390 px',
              () => keySpendThisPeriod(server, page, keys));
    await run('key_spend_new_period', 'past the month\'s end each key shows $0.00 for the new ' +
              'month, its period in the title, while the since-start counters do not',
              () => keySpendNewPeriod(server, page, keys));
    await wholePageShot(page, 'console-keys-phone-' + BACKEND + '.png');
    await run('keys_first_page', 'one key past a page (1,000, KEYS_PAGE) shows the first ' +
              '1,000 and says so', () => keysFirstPage(server, page));
    await run('keys_console_clean', 'the browser console logged no error or warning but the ' +
              'refused create (400)', async () => {
      const problems = consoleProblems(page, /status of 400/);
      equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
    });
    await page.close();
  } finally {
    if (server !== null) await server.stop();
    upstream.child.kill('SIGTERM');
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

// ---- MCP tool calls (docs/mcp.md) --------------------------------------------------

// A fake MCP server of the official SDK (tests/gateway/mcp), answering JSON.
function startFakeMcp() {
  const script = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'gateway', 'mcp',
                           'fake_mcp_server.mjs');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, '--json'], {stdio: ['ignore', 'ignore', 'pipe'],
                                                               cwd: path.dirname(script)});
    let out = '';
    const timer = setTimeout(() => reject(new Error('the fake MCP server did not start')), 60000);
    child.on('error', reject);
    child.stderr.on('data', (chunk) => {
      out += chunk.toString();
      const match = /listening on ([0-9]+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({child, url: 'http://127.0.0.1:' + match[1] + '/mcp'});
      }
    });
  });
}

const HOSTILE_SERVER = '<img/src=x/onerror=window.__pwned=3>';
const HOSTILE_TOOL = '<script>window.__pwned=4</script> <b>bold</b>';

// One MCP message to the gateway's /mcp/{server}: its status, session and JSON answer.
async function mcpPost(server, secret, session, message) {
  const headers = {Authorization: 'Bearer ' + secret, 'Content-Type': 'application/json',
                   Accept: 'application/json, text/event-stream',
                   'MCP-Protocol-Version': '2025-06-18'};
  if (session) headers['Mcp-Session-Id'] = session;
  const response = await fetch(server.url + '/mcp/' + encodeURIComponent(HOSTILE_SERVER),
                               {method: 'POST', headers, body: JSON.stringify(message)});
  const text = await response.text();
  return {status: response.status, session: response.headers.get('mcp-session-id'),
          body: text ? JSON.parse(text) : null};
}

// The tool rows of the Gateway panel, each cell's text.
const toolRowsOf = (page) => page.evaluate(() => [...document.querySelectorAll(
  '#gateway-tools tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));

async function toolsShown(server, page) {
  const made = await server.request('POST', '/v1/admin/keys', {caller: 'tool-bot', team: 'ops'});
  equal(made.status, 201, 'the key is made');
  const key = made.body;
  const init = await mcpPost(server, key.secret, null, {jsonrpc: '2.0', id: 1, method: 'initialize',
    params: {protocolVersion: '2025-06-18', capabilities: {},
             clientInfo: {name: 'console-test', version: '1'}}});
  equal(init.status, 200, 'initialize through the gateway');
  await mcpPost(server, key.secret, init.session, {jsonrpc: '2.0', method: 'notifications/initialized'});
  for (const [id, name] of [[2, 'web_search'], [3, 'web_search'], [4, HOSTILE_TOOL]]) {
    const call = await mcpPost(server, key.secret, init.session, {jsonrpc: '2.0', id,
      method: 'tools/call', params: {name, arguments: {query: 'q'}}});
    equal(call.status, 200, 'tools/call ' + name);
  }
  const answer = await server.ok('GET', '/v1/console/gateway');
  equal(answer.tools.length, 2, 'two server and tool pairs: ' + JSON.stringify(answer.tools));
  await page.waitForFunction(() => document.querySelectorAll('#gateway-tools tbody tr').length === 2,
                             {timeout: 20000});
  const rows = await toolRowsOf(page);
  const search = rows.find((r) => r[1] === 'web_search');
  equal(JSON.stringify(search), JSON.stringify([HOSTILE_SERVER, 'web_search', '2', '0', '$0.01',
                                                '0']), 'web_search: 2 calls charged 5,000 each');
  const hostile = rows.find((r) => r[1] === HOSTILE_TOOL);
  check(hostile !== undefined, 'the hostile tool name shows as text: ' + JSON.stringify(rows));
  equal(hostile[3], '1', 'the unknown tool\'s call is an error (the server refused it)');
  const injected = await page.evaluate(() => [window.__pwned !== undefined,
    document.querySelectorAll('#gateway-panel img, #gateway-panel script, #gateway-panel b').length]);
  equal(JSON.stringify(injected), '[false,0]', 'nothing of the names ran or became markup');
}

async function toolsReadWell(page, where) {
  const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(widths[0] <= widths[1], 'nothing wider than the page (' + where + '): ' + widths.join(' > '));
  const cut = await page.evaluate(() => [...document.querySelectorAll('#gateway-tools td')]
    .filter((td) => td.scrollWidth > td.clientWidth + 1).map((td) => td.textContent));
  equal(JSON.stringify(cut), '[]', 'tool cells cut off (' + where + ')');
  const shown = await page.evaluate(() => {
    const box = document.querySelector('#gateway-tools').getBoundingClientRect();
    return box.width > 0 && box.height > 0;
  });
  check(shown, 'the tool table is shown (' + where + ')');
}

async function toolsScenario(browser) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-console-mcp-'));
  const upstream = await startFakeUpstream(dir);
  let mcp = null, server = null;
  try {
    mcp = await startFakeMcp();
    const file = gatewayConfig(dir, upstream.url);
    const config = JSON.parse(fs.readFileSync(file, 'utf8'));
    config.mcp_servers = [{name: HOSTILE_SERVER, url: mcp.url, api_key_env: 'CONSOLE_TEST_MCP_KEY',
                           tools: [{name: 'web_search', usd_micros_per_call: 5000}]}];
    fs.writeFileSync(file, JSON.stringify(config));
    server = await new Server(['--gateway-config', file],
                              {CONSOLE_TEST_PROVIDER_KEY: 'unused',
                               CONSOLE_TEST_MCP_KEY: 'mcp-server-secret'}).start();
    await server.put({key: 'team:ops:usd:month', kind: 'budget', capacity: 100000000,
                      period: 'month', unit: 'usd_micros'});
    const page = await newPage(browser, 1400, 1000);
    await page.goto(server.url + '/console');
    await page.waitForFunction(() => document.body.dataset.state === 'ok', {timeout: 20000});
    await run('tools_shown', 'the Gateway panel shows MCP tool calls by server and tool with ' +
              'their calls, errors and spend; hostile names as text', () => toolsShown(server, page));
    await run('tools_read_well_desktop', 'the tool table fits and cuts no text (1400 px)',
              () => toolsReadWell(page, 'desktop'));
    await page.setViewport({width: 390, height: 844, isMobile: true, hasTouch: true});
    await nextRefresh(page);
    await run('tools_read_well_phone', 'the tool table fits a phone and cuts no text (390 px)',
              () => toolsReadWell(page, 'phone'));
    await wholePageShot(page, 'console-tools-phone-' + BACKEND + '.png');
    await run('tools_console_clean', 'the browser console logged no error or warning', async () => {
      const problems = consoleProblems(page);
      equal(problems.length, 0, 'console problems ' + JSON.stringify(problems));
    });
    await page.close();
  } finally {
    if (server !== null) await server.stop();
    if (mcp !== null) mcp.child.kill('SIGTERM');
    upstream.child.kill('SIGTERM');
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

// ---- main ------------------------------------------------------------------------

fs.mkdirSync(OUT, {recursive: true});
console.log('console in ' + CHROMIUM + ' against llmlimitd --backend ' + BACKEND);
const browser = await openBrowser();
try {
  const scenarios = {main: mainScenario, spend: spendScenario, link: linkScenario,
                     token: tokenScenario, keys: keysScenario, tools: toolsScenario};
  for (const [name, scenario] of Object.entries(scenarios)) {
    if (ONLY === '' || ONLY === name) await scenario(browser);
  }
} finally {
  await closeBrowser(browser);
}
console.log(passed + ' passed, ' + failures + ' failed; screenshots in ' + OUT);
process.exit(failures === 0 ? 0 : 1);
