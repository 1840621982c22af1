// Measures the console (docs/console.md) with many limits: the time from
// navigation to the page fully drawn, the bytes that took, and the time and
// bytes of each later refresh, in the system's headless Chromium.
//
//   node bench/console/measure.mjs --binary build/llmlimitd [--limits 1000]
//        [--backend memory] [--runs 5] [--refreshes 10]
//
// The limits: a quarter budgets (usd_micros), a quarter concurrency, half
// rolling; every limit holds something from a few callers, so every column
// and every budget card has figures. Figures are printed, nothing is kept.
// Needs puppeteer-core from tests/console (npm ci there) and Chromium.
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';

const require = createRequire(new URL('../../tests/console/package.json', import.meta.url));

function argument(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const BINARY = path.resolve(argument('binary', 'build/llmlimitd'));
const LIMITS = Number(argument('limits', '1000'));
const BACKEND = argument('backend', 'memory');
const RUNS = Number(argument('runs', '5'));
const REFRESHES = Number(argument('refreshes', '10'));
const CHROMIUM = argument('chromium', process.env.CHROMIUM || '/usr/bin/chromium');

let puppeteer;
try {
  puppeteer = require('puppeteer-core');
} catch (e) {
  console.error('bench/console: npm ci in tests/console first (puppeteer-core)');
  process.exit(1);
}

function startServer(dataDir) {
  return new Promise((resolve, reject) => {
    const child = spawn(BINARY, ['--listen', '127.0.0.1:0', '--backend', BACKEND,
                                 '--data-dir', dataDir, '--log-level', 'warn'],
                        {stdio: ['ignore', 'ignore', 'pipe']});
    let text = '';
    child.stderr.on('data', (chunk) => {
      text += chunk.toString();
      const match = /llmlimitd listening on ([0-9.]+):([0-9]+)/.exec(text);
      if (match) resolve({child, url: 'http://' + match[1] + ':' + match[2]});
    });
    child.on('exit', (code) => reject(new Error('llmlimitd exited ' + code + ': ' + text)));
  });
}

async function call(url, method, body) {
  const response = await fetch(url, {method, headers: {'Content-Type': 'application/json'},
                                     body: JSON.stringify(body)});
  if (response.status !== 200) throw new Error(url + ': ' + response.status);
  return response.json();
}

function definition(i) {
  const key = 'bench:' + String(i).padStart(5, '0');
  switch (i % 4) {
  case 0: return {key: key + ':usd:month', kind: 'budget', capacity: 100000000, period: 'month',
                  timeout_seconds: 300, unit: 'usd_micros'};
  case 1: return {key: key + ':concurrent', kind: 'concurrency', capacity: 64, timeout_seconds: 3600};
  default: return {key: key + ':tpm', kind: 'rolling', capacity: 100000, window_seconds: 3600,
                   unit: 'tokens'};
  }
}

async function load(url) {
  const keys = [];
  for (let i = 0; i < LIMITS; i++) {
    const d = definition(i);
    await call(url + '/v1/admin/limits', 'PUT', d);
    keys.push(d.key);
  }
  // Three reserves per limit, in batches, from four callers; some completed.
  const requests = [];
  for (let round = 0; round < 3; round++) {
    keys.forEach((key, i) => requests.push({
      lease_id: 'l-' + round + '-' + i, caller: 'caller-' + ((i + round) % 4),
      requirements: [{key, amount: key.endsWith(':concurrent') ? 1 : 100}]}));
  }
  for (let i = 0; i < requests.length; i += 500) {
    await call(url + '/v1/reserve/batch', 'POST', {requests: requests.slice(i, i + 500)});
  }
  const completes = requests.filter((r, i) => i % 3 === 0)
    .map((r) => ({lease_id: r.lease_id, actuals: [{key: r.requirements[0].key, actual_amount: 80}]}));
  for (let i = 0; i < completes.length; i += 500) {
    await call(url + '/v1/complete/batch', 'POST', {requests: completes.slice(i, i + 500)});
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function measureLoad(browser, url) {
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 1000});
  const sizes = [];
  page.on('requestfinished', async (request) => {
    const response = request.response();
    try {
      sizes.push({url: request.url(), bytes: (await response.buffer()).length});
    } catch (e) { /* an empty body (304): nothing to count */ }
  });
  const started = Date.now();
  await page.goto(url + '/console');
  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1,
                             {timeout: 60000, polling: 10});
  // Drawn: the frame after the one that laid the figures out has started.
  await page.evaluate(() => new Promise((resolve) =>
    requestAnimationFrame(() => requestAnimationFrame(resolve))));
  const loadMs = Date.now() - started;
  const rows = await page.evaluate(() => document.querySelectorAll('#limits-body .lrow').length);
  await new Promise((resolve) => setTimeout(resolve, 200)); // the last bodies are counted
  const bytes = sizes.reduce((sum, s) => sum + s.bytes, 0);
  const limitsBytes = sizes.filter((s) => s.url.includes('/v1/console/limits'))
    .reduce((sum, s) => sum + s.bytes, 0);
  return {page, loadMs, rows, bytes, limitsBytes, requests: sizes.length, sizes};
}

async function measureRefreshes(page) {
  await page.select('#refresh', '1000');
  const times = [];
  let seen = await page.evaluate(() => Number(document.body.dataset.refreshes));
  for (let i = 0; i < REFRESHES; i++) {
    await page.waitForFunction((n) => Number(document.body.dataset.refreshes) > n,
                               {timeout: 60000, polling: 10}, seen);
    seen = await page.evaluate(() => Number(document.body.dataset.refreshes));
    times.push(await page.evaluate(() => Number(document.body.dataset.refreshMs)));
  }
  return times;
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-bench-console-'));
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-bench-chromium-'));
const server = await startServer(dataDir);
let browser;
try {
  await load(server.url);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run']});
  const loads = [];
  let last;
  for (let run = 0; run < RUNS; run++) {
    if (last) await last.page.close();
    last = await measureLoad(browser, server.url);
    loads.push(last);
  }
  const refreshes = await measureRefreshes(last.page);
  const first = loads[0];
  console.log('console with ' + LIMITS + ' limits, ' + BACKEND + ' backend, Chromium headless');
  console.log('  rows drawn: ' + first.rows);
  console.log('  load to fully drawn: median ' + median(loads.map((l) => l.loadMs)) + ' ms over ' +
              RUNS + ' loads (min ' + Math.min(...loads.map((l) => l.loadMs)) + ', max ' +
              Math.max(...loads.map((l) => l.loadMs)) + ')');
  console.log('  payload of a load: ' + first.bytes + ' bytes in ' + first.requests +
              ' responses (GET /v1/console/limits: ' + first.limitsBytes + ' bytes)');
  for (const s of first.sizes) console.log('    ' + s.bytes + '\t' + s.url.replace(server.url, ''));
  console.log('  a refresh (read and redraw): median ' + median(refreshes) + ' ms over ' +
              refreshes.length + ' (min ' + Math.min(...refreshes) + ', max ' +
              Math.max(...refreshes) + ')');
} finally {
  if (browser) await browser.close();
  server.child.kill('SIGTERM');
  fs.rmSync(profile, {recursive: true, force: true});
  await new Promise((resolve) => setTimeout(resolve, 300));
  fs.rmSync(dataDir, {recursive: true, force: true});
}
