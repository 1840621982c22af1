// Makes the screenshot of docs/console.md: llmlimitd on the memory backend
// with its test clock moved to the start of the month, ten days of a team's
// spend sampled as they pass, then a morning's traffic (live holds, a full
// concurrency pool, denials), and the console drawn in headless Chromium.
//
//   node bench/console/screenshot.mjs --binary build/llmlimitd --out docs/console.png
//
// Needs puppeteer-core from tests/console (npm ci there) and Chromium.
import {spawn} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {createRequire} from 'node:module';

const require = createRequire(new URL('../../tests/console/package.json', import.meta.url));
const puppeteer = require('puppeteer-core');

function argument(name, fallback) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const BINARY = path.resolve(argument('binary', 'build/llmlimitd'));
const OUT = path.resolve(argument('out', 'docs/console.png'));
const CHROMIUM = argument('chromium', process.env.CHROMIUM || '/usr/bin/chromium');
const HOUR = 3600000;

function startServer(dataDir) {
  return new Promise((resolve, reject) => {
    const child = spawn(BINARY, ['--listen', '127.0.0.1:0', '--backend', 'memory', '--data-dir',
                                 dataDir, '--test-clock', '--log-level', 'warn'],
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

let server;
async function call(method, route, body) {
  const response = await fetch(server.url + route, {
    method, headers: {'Content-Type': 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body)});
  return response.json();
}

let leases = 0;
async function spend(requirements, actuals, caller) {
  const lease = 'shot-' + leases++;
  await call('POST', '/v1/reserve', {lease_id: lease, caller, requirements: Object.entries(requirements)
    .map(([key, amount]) => ({key, amount}))});
  if (actuals) {
    await call('POST', '/v1/complete', {lease_id: lease, actuals: Object.entries(actuals)
      .map(([key, amount]) => ({key, actual_amount: amount}))});
  }
}

async function waitForPoints(key, count) {
  for (let i = 0; i < 200; i++) {
    const s = await call('GET', '/v1/console/spend/' + encodeURIComponent(key));
    if (s.points.length >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-shot-'));
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-shot-chromium-'));
server = await startServer(dataDir);
try {
  const limits = [
    {key: 'team:sales:usd:month', kind: 'budget', capacity: 400000000, period: 'month',
     timeout_seconds: 120, unit: 'usd_micros', description: 'Sales assistants, all models'},
    {key: 'team:support:usd:month', kind: 'budget', capacity: 150000000, period: 'month',
     timeout_seconds: 120, unit: 'usd_micros', description: 'Support bot'},
    {key: 'global:openai:gpt-4o:rpm', kind: 'rolling', capacity: 500, window_seconds: 60,
     unit: 'requests'},
    {key: 'global:openai:gpt-4o:tpm', kind: 'rolling', capacity: 30000, window_seconds: 60,
     unit: 'tokens'},
    {key: 'local:llama-70b:concurrent', kind: 'concurrency', capacity: 4, timeout_seconds: 120,
     unit: 'requests'},
  ];
  for (const limit of limits) await call('PUT', '/v1/admin/limits', limit);
  // To noon on the 1st of this month (UTC), then ten days, a sample at each step.
  const now = (await call('POST', '/v1/admin/clock', {advance_ms: 0})).now_unix_ms;
  const today = new Date(now);
  const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
  await call('POST', '/v1/admin/clock', {advance_ms: monthStart - now});
  for (let step = 0; step < 20; step++) {
    await call('POST', '/v1/admin/clock', {advance_ms: 12 * HOUR});
    const busy = step % 2 === 0 ? 1.4 : 0.6; // days and nights
    await spend({'team:sales:usd:month': 20000000}, {'team:sales:usd:month':
      Math.round(6000000 * busy * (1 + step / 20))}, step % 3 ? 'sales-assistant' : 'lead-scorer');
    await spend({'team:support:usd:month': 10000000}, {'team:support:usd:month':
      Math.round(2600000 * busy)}, 'support-bot');
    await waitForPoints('team:sales:usd:month', step + 1);
  }
  // This morning's traffic: open calls, a full pool, denials.
  const callers = ['sales-assistant', 'lead-scorer', 'support-bot'];
  for (let i = 0; i < 9; i++) {
    await spend({'global:openai:gpt-4o:rpm': 1, 'global:openai:gpt-4o:tpm': 2400,
                 'team:sales:usd:month': 60000}, i < 5 ? {'global:openai:gpt-4o:tpm': 1800,
                 'team:sales:usd:month': 45000} : null, callers[i % 3]);
  }
  for (let i = 0; i < 6; i++) {
    await spend({'local:llama-70b:concurrent': 1}, null, i % 2 ? 'batch-summarizer' : 'support-bot');
  }
  await spend({'global:openai:gpt-4o:tpm': 20000}, null, 'bulk-import');
  await call('POST', '/v1/admin/clock', {advance_ms: 1000});

  const browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run']});
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 1000});
    await page.goto(server.url + '/console');
    await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 2,
                               {timeout: 30000});
    await page.screenshot({path: OUT, clip: {x: 0, y: 0, width: 1280, height: 1240}});
    console.log('wrote ' + OUT + ' (' + fs.statSync(OUT).size + ' bytes)');
  } finally {
    await browser.close();
  }
} finally {
  server.child.kill('SIGTERM');
  fs.rmSync(profile, {recursive: true, force: true});
  await new Promise((resolve) => setTimeout(resolve, 300));
  fs.rmSync(dataDir, {recursive: true, force: true});
}
