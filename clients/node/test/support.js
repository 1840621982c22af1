// Test fixtures: the real llmlimitd on a free loopback port, a proxy that
// injects faults in front of it, and a server that never answers.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..', '..');
const LISTENING = /llmlimitd listening on ([0-9.]+):([0-9]+)/;
const START_TIMEOUT_MS = 10_000;

export function binary() {
  return process.env.LLMLIMITD || path.join(REPO, 'build', 'llmlimitd');
}

/** A limit key no other test uses, so tests can share one server. */
export function uniqueKey(name) {
  return `test:${name}:${randomBytes(6).toString('hex')}`;
}

export const rolling = (key, capacity, windowSeconds = 60) =>
  ({ key, kind: 'rolling', capacity, window_seconds: windowSeconds });
export const concurrency = (key, capacity, timeoutSeconds = 60) =>
  ({ key, kind: 'concurrency', capacity, timeout_seconds: timeoutSeconds });

/**
 * One llmlimitd process on the memory backend. After the first start it
 * comes back on the same port, as a restarted service would.
 */
export class Server {
  constructor() {
    this.dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llmlimit-node-'));
    this.port = 0;
    this.process = null;
    this.stderr = '';
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  start() {
    const args = ['--listen', `127.0.0.1:${this.port}`, '--backend', 'memory',
      '--data-dir', this.dataDir];
    const child = spawn(binary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.process = child;
    this.stderr = '';
    return new Promise((resolve, reject) => {
      let started = false;
      const fail = (error) => {
        if (started) return;
        started = true;
        clearTimeout(timer);
        child.kill('SIGKILL');
        reject(error);
      };
      const timer = setTimeout(() => fail(new Error(`llmlimitd did not start:\n${this.stderr}`)),
        START_TIMEOUT_MS);
      child.on('error', fail);
      child.on('exit', () => fail(new Error(`llmlimitd exited:\n${this.stderr}`)));
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk) => {
        this.stderr += chunk;
        const match = started ? null : LISTENING.exec(this.stderr);
        if (match) {
          started = true;
          clearTimeout(timer);
          this.port = Number(match[2]);
          resolve(this);
        }
      });
    });
  }

  /**
   * Sends signal and waits for the exit. A graceful stop (SIGTERM) must end
   * in exit 0, else it rejects with the end of stderr: a sanitizer report at
   * exit, or a server that died by itself, fails the test.
   */
  stop(signal = 'SIGTERM') {
    const child = this.process;
    this.process = null;
    if (child === null) {
      return Promise.resolve();
    }
    const check = (resolve, reject) => {
      if (signal !== 'SIGTERM' || child.exitCode === 0) {
        resolve();
        return;
      }
      const how = child.exitCode !== null ? `exited ${child.exitCode}` : `died of ${child.signalCode}`;
      reject(new Error(`llmlimitd ${how} when stopped:\n${this.stderr.slice(-4000)}`));
    };
    return new Promise((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        check(resolve, reject);
        return;
      }
      child.on('exit', () => check(resolve, reject));
      child.kill(signal);
    });
  }

  kill() {
    return this.stop('SIGKILL');
  }

  async cleanup() {
    await this.stop();
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }

  async request(method, urlPath, body) {
    const response = await fetch(this.url + urlPath, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  async put(definition) {
    const { status, body } = await this.request('PUT', '/v1/admin/limits', definition);
    if (status !== 200) throw new Error(`put ${definition.key}: ${status} ${JSON.stringify(body)}`);
  }

  /** Reserves waiting for capacity now (llmlimit_wait_waiting in /metrics). */
  async waiting() {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const match = /^llmlimit_wait_waiting (\d+)$/m.exec(text);
    if (!match) throw new Error('llmlimit_wait_waiting missing from /metrics');
    return Number(match[1]);
  }

  /** Resolves true once count reserves wait on the server, false after timeoutMs. */
  async waitQueued(count, timeoutMs = 10_000) {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (await this.waiting() === count) return true;
      await sleep(10);
    }
    return false;
  }

  async usageOf(key) {
    const { status, body } = await this.request('GET', `/v1/usage/${encodeURIComponent(key)}`);
    if (status !== 200) throw new Error(`usage ${key}: ${status} ${JSON.stringify(body)}`);
    return body;
  }
}

function readBody(request) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

/**
 * HTTP proxy in front of a Server. Records every request; the first
 * `failures` requests to `faultPath` get a fault instead of a plain forward:
 *   '503':        answered 503 backend_error, never forwarded;
 *   '503_after':  forwarded, the server's answer dropped, 503 answered;
 *   'drop_after': forwarded, then the connection destroyed with no answer.
 */
export class FaultProxy {
  constructor(server, faultPath = '/v1/reserve', failures = 0, mode = '503') {
    this.server = server;
    this.faultPath = faultPath;
    this.failures = failures;
    this.mode = mode;
    this.requests = [];
    this.http = http.createServer((request, response) => this.#handle(request, response));
  }

  async listen() {
    await new Promise((resolve) => this.http.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url() {
    return `http://127.0.0.1:${this.http.address().port}`;
  }

  bodies(urlPath) {
    return this.requests.filter((r) => r.path === urlPath).map((r) => r.body);
  }

  close() {
    this.http.closeAllConnections?.();
    return new Promise((resolve) => this.http.close(() => resolve()));
  }

  async #handle(request, response) {
    const raw = await readBody(request);
    let body = null;
    try {
      body = raw.length ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    this.requests.push({ method: request.method, path: request.url, body });
    let fault = null;
    if (request.url === this.faultPath && this.failures > 0) {
      this.failures -= 1;
      fault = this.mode;
    }
    const unavailable = JSON.stringify({ error: 'backend_error' });
    if (fault === '503') return response.writeHead(503).end(unavailable);
    const headers = {};
    for (const name of ['content-type', 'authorization']) {
      if (request.headers[name]) headers[name] = request.headers[name];
    }
    const forwarded = await fetch(this.server.url + request.url, {
      method: request.method, headers, body: raw.length ? raw : undefined,
    });
    const text = await forwarded.text();
    if (fault === '503_after') return response.writeHead(503).end(unavailable);
    if (fault === 'drop_after') return request.socket.destroy();
    return response.writeHead(forwarded.status, { 'content-type': 'application/json' }).end(text);
  }
}

/** Accepts connections and reads requests but never answers. */
export class SilentServer {
  constructor() {
    this.sockets = new Set();
    this.net = net.createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.resume();
    });
  }

  async listen() {
    await new Promise((resolve) => this.net.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get url() {
    return `http://127.0.0.1:${this.net.address().port}`;
  }

  close() {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((resolve) => this.net.close(() => resolve()));
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
