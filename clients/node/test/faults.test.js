// Client against faults: 503s and lost answers in front of the real
// llmlimitd, the server killed and restarted, a server that never answers.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client, Unavailable } from '../src/index.js';
import { FaultProxy, Server, SilentServer, concurrency, rolling, sleep, uniqueKey } from './support.js';

describe('through a fault-injecting proxy', () => {
  let server;
  before(async () => {
    server = await new Server().start();
  });
  after(async () => {
    await server.cleanup();
  });

  async function oneReservation(t, mode) {
    const key = uniqueKey('tpm');
    await server.put(rolling(key, 1000));
    const proxy = await new FaultProxy(server, '/v1/reserve', 3, mode).listen();
    t.after(() => proxy.close());
    const r = await new Client(proxy.url).reserve({ [key]: 70 }, { deadlineMs: 10_000 });
    assert.equal(r.allowed, true);
    const ids = proxy.bodies('/v1/reserve').map((b) => b.lease_id);
    assert.deepEqual(ids, Array(4).fill(r.leaseId));
    assert.equal((await server.usageOf(key)).reserved, 70);
  }

  test('three 503s then the server: 4 attempts, one lease id, 70 reserved once', (t) =>
    oneReservation(t, '503'));

  test('the server reserved but the client saw 503 three times: exactly one reservation', (t) =>
    oneReservation(t, '503_after'));

  test('the server reserved but the connection died before the answer: one reservation', (t) =>
    oneReservation(t, 'drop_after'));

  test('503 on every attempt: Unavailable naming the lease, near the deadline', async (t) => {
    const key = uniqueKey('tpm');
    await server.put(rolling(key, 10));
    const proxy = await new FaultProxy(server, '/v1/reserve', 1e9, '503').listen();
    t.after(() => proxy.close());
    const started = performance.now();
    let leaseId;
    await assert.rejects(new Client(proxy.url).reserve({ [key]: 1 }, { deadlineMs: 1000 }),
      (e) => e instanceof Unavailable && (leaseId = e.leaseId) !== undefined);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 900 && elapsed < 2000, String(elapsed));
    assert.deepEqual(new Set(proxy.bodies('/v1/reserve').map((b) => b.lease_id)), new Set([leaseId]));
    assert.equal((await server.usageOf(key)).reserved, 0);
  });

  test('a complete whose answer is lost is retried and reconciles once', async (t) => {
    const key = uniqueKey('tpm');
    await server.put(rolling(key, 1000));
    const proxy = await new FaultProxy(server, '/v1/complete', 1, '503_after').listen();
    t.after(() => proxy.close());
    const lease = await new Client(proxy.url).acquire({ [key]: 100 }, {}, async (l) => {
      l.actual(key, 40);
      return l;
    });
    assert.equal(lease.completion.reconciled, true);
    const u = await server.usageOf(key);
    assert.deepEqual([u.reserved, u.used], [0, 40]);
  });

  test('a release that never gets through does not hide the callback error', async (t) => {
    const key = uniqueKey('tpm');
    await server.put(rolling(key, 1000));
    const proxy = await new FaultProxy(server, '/v1/release', 1e9, '503').listen();
    t.after(() => proxy.close());
    const warnings = [];
    const c = new Client(proxy.url, { finalizeDeadlineMs: 500, onWarning: (m) => warnings.push(m) });
    await assert.rejects(c.acquire({ [key]: 100 }, async () => {
      throw new Error('bad prompt');
    }), /bad prompt/);
    assert.equal(warnings.length, 1);
    // Never freed locally: the hold stays until it expires.
    assert.equal((await server.usageOf(key)).reserved, 100);
  });
});

describe('server killed and restarted', () => {
  test('a reserve made while the server is dead gets through once it is back: one reservation', async (t) => {
    const server = await new Server().start();
    t.after(() => server.cleanup());
    const key = uniqueKey('tpm');
    await server.put(rolling(key, 1000));
    const client = new Client(server.url);
    await client.usage(key); // a keep-alive connection the kill breaks
    await server.kill();
    let settled = false;
    const pending = client.reserve({ [key]: 25 }, { deadlineMs: 15_000 }).finally(() => {
      settled = true;
    });
    await sleep(500);
    assert.equal(settled, false);
    await server.start();
    const r = await pending;
    assert.equal(r.allowed, true);
    // The memory backend keeps the registry, not usage: all that is
    // reserved now is this one call.
    assert.equal((await server.usageOf(key)).reserved, 25);
  });

  test('killed and restarted inside the callback: it ends cleanly, nothing held', async (t) => {
    const server = await new Server().start();
    t.after(() => server.cleanup());
    const key = uniqueKey('conc');
    await server.put(concurrency(key, 1));
    const client = new Client(server.url);
    const lease = await client.acquire({ [key]: 1 }, { deadlineMs: 5000 }, async (l) => {
      await server.kill();
      await server.start();
      l.actual(key, 1);
      return l;
    });
    // The restarted memory backend never saw the lease: nothing to
    // reconcile, and the slot is free.
    assert.equal(lease.state, 'completed');
    assert.equal(lease.completion.reconciled, false);
    assert.equal((await server.usageOf(key)).reserved, 0);
    await client.acquire({ [key]: 1 }, { deadlineMs: 5000 }, async () => {
      assert.equal((await server.usageOf(key)).reserved, 1);
    });
  });

  test('with the server gone for good, reserve rejects with Unavailable near its deadline', async (t) => {
    const server = await new Server().start();
    t.after(() => server.cleanup());
    const client = new Client(server.url);
    await server.kill();
    const started = performance.now();
    await assert.rejects(client.reserve({ k: 1 }, { deadlineMs: 1000 }), Unavailable);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 900 && elapsed < 2000, String(elapsed));
  });
});

describe('a server that never answers', () => {
  let silent;
  let client;
  before(async () => {
    silent = await new SilentServer().listen();
    client = new Client(silent.url, { attemptTimeoutMs: 400 });
  });
  after(() => silent.close());

  async function timed(promise) {
    const started = performance.now();
    await assert.rejects(promise, Unavailable);
    return performance.now() - started;
  }

  test('reserve rejects with Unavailable near its 1.5 s deadline', async () => {
    const elapsed = await timed(client.reserve({ k: 1 }, { deadlineMs: 1500 }));
    assert.ok(elapsed >= 1400 && elapsed < 2500, String(elapsed));
  });

  test('acquire stops near its 1 s deadline with Unavailable, not Denied', async () => {
    const elapsed = await timed(client.acquire({ k: 1 }, { deadlineMs: 1000 }));
    assert.ok(elapsed >= 900 && elapsed < 2000, String(elapsed));
  });

  test('complete is bounded by its own deadline', async () => {
    const elapsed = await timed(client.complete('L', { k: 1 }, { deadlineMs: 800 }));
    assert.ok(elapsed >= 700 && elapsed < 1800, String(elapsed));
  });
});
