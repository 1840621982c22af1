// Client against the real llmlimitd: allowed, denied and unknown-key
// outcomes, acquire's callback, and many concurrent calls on one client.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ApiError, Client, Denied } from '../src/index.js';
import { FaultProxy, Server, concurrency, rolling, sleep, uniqueKey } from './support.js';

let server;
let client;

before(async () => {
  server = await new Server().start();
  client = new Client(server.url);
});

after(async () => {
  await server.cleanup();
});

test('an allowed reserve holds the amount; complete shrinks it to the actual', async () => {
  const key = uniqueKey('tpm');
  await server.put(rolling(key, 1000));
  const r = await client.reserve({ [key]: 400 }, { deadlineMs: 5000 });
  assert.equal(r.allowed, true);
  assert.deepEqual([r.error, r.deniedKeys, r.retryAfterMs], ['', [], 0]);
  assert.ok(r.expiresAtUnixMs > r.reservedAtUnixMs);
  assert.equal((await server.usageOf(key)).reserved, 400);
  const done = await client.complete(r.leaseId, { [key]: 150 });
  assert.deepEqual(done, { ok: true, reconciled: true, warnings: [] });
  const u = await server.usageOf(key);
  assert.deepEqual([u.reserved, u.used], [0, 150]);
});

test('a full limit answers allowed=false, error "", the key and retryAfterMs > 0', async () => {
  const key = uniqueKey('rpm');
  await server.put(rolling(key, 1));
  assert.equal((await client.reserve({ [key]: 1 })).allowed, true);
  const r = await client.reserve({ [key]: 1 });
  assert.equal(r.allowed, false);
  assert.deepEqual([r.error, r.deniedKeys], ['', [key]]);
  assert.ok(r.retryAfterMs > 0);
  assert.equal((await server.usageOf(key)).reserved, 1);
});

test('a key with no limit is a definitive denial naming it', async () => {
  const key = uniqueKey('missing');
  const r = await client.reserve({ [key]: 1 });
  assert.equal(r.allowed, false);
  assert.equal(r.error, `unknown_limit_key: ${key}`);
  assert.deepEqual(r.deniedKeys, [key]);
});

test('the same caller-chosen lease id reserves once; other amounts are lease_conflict', async () => {
  const key = uniqueKey('tpm');
  await server.put(rolling(key, 100));
  const first = await client.reserve({ [key]: 30 }, { leaseId: 'order-17-call-1' });
  const again = await client.reserve({ [key]: 30 }, { leaseId: 'order-17-call-1' });
  assert.deepEqual(first, again);
  assert.equal((await server.usageOf(key)).reserved, 30);
  await assert.rejects(client.reserve({ [key]: 31 }, { leaseId: 'order-17-call-1' }),
    (e) => e instanceof ApiError && e.status === 409 && e.error === 'lease_conflict');
});

test('release frees the hold; a later complete is 409 already_finalized', async () => {
  const key = uniqueKey('tpm');
  await server.put(rolling(key, 100));
  const { leaseId } = await client.reserve({ [key]: 10 });
  await client.release(leaseId);
  assert.equal((await server.usageOf(key)).reserved, 0);
  await assert.rejects(client.complete(leaseId, { [key]: 1 }),
    (e) => e instanceof ApiError && e.status === 409 && e.error === 'already_finalized');
});

test('usage returns the server numbers; an unknown key is ApiError 404', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 5));
  await client.reserve({ [key]: 2 });
  const u = await client.usage(key);
  assert.deepEqual([u.key, u.kind, u.capacity, u.reserved, u.available],
    [key, 'concurrency', 5, 2, 3]);
  await assert.rejects(client.usage(uniqueKey('missing')), (e) => e instanceof ApiError && e.status === 404);
});

test('acquire rejects an unknown key and an amount over capacity at once', async () => {
  const key = uniqueKey('tpm');
  await server.put(rolling(key, 10));
  const started = performance.now();
  await assert.rejects(client.acquire({ [key]: 11 }, { deadlineMs: 10_000 }),
    (e) => e instanceof Denied && e.error === `exceeds_capacity:${key}`);
  const missing = uniqueKey('missing');
  await assert.rejects(client.acquire({ [missing]: 1 }, { deadlineMs: 10_000 }),
    (e) => e instanceof Denied && e.error === `unknown_limit_key: ${missing}`);
  assert.ok(performance.now() - started < 2000);
});

test('a full 60 s window with a 1 s deadline: Denied within the deadline', async () => {
  const key = uniqueKey('rpm');
  await server.put(rolling(key, 1));
  await client.reserve({ [key]: 1 });
  const started = performance.now();
  await assert.rejects(client.acquire({ [key]: 1 }, { deadlineMs: 1000 }, async () => 'never'),
    (e) => e instanceof Denied && e.error === '' && e.deniedKeys[0] === key);
  assert.ok(performance.now() - started < 1500);
  assert.equal((await server.usageOf(key)).reserved, 1);
});

test('acquire waits for a freed slot, each retry with a new lease id', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 1));
  const holder = (await client.reserve({ [key]: 1 })).leaseId;
  const proxy = await new FaultProxy(server).listen();
  try {
    setTimeout(() => client.release(holder), 500);
    const started = performance.now();
    const leaseId = await new Client(proxy.url).acquire({ [key]: 1 }, { deadlineMs: 10_000 },
      async (lease) => lease.leaseId);
    assert.ok(performance.now() - started >= 400);
    const ids = proxy.bodies('/v1/reserve').map((b) => b.lease_id);
    assert.ok(ids.length >= 2);
    assert.equal(new Set(ids).size, ids.length);
    assert.equal(ids.at(-1), leaseId);
  } finally {
    await proxy.close();
  }
  assert.equal((await server.usageOf(key)).reserved, 0);
});

test('acquire callback: completes with actuals and returns the callback value', async () => {
  const tpm = uniqueKey('tpm');
  const slots = uniqueKey('conc');
  await server.put(rolling(tpm, 1000));
  await server.put(concurrency(slots, 2));
  let seen;
  const value = await client.acquire({ [tpm]: 500, [slots]: 1 }, { deadlineMs: 5000 },
    async (lease) => {
      assert.equal((await server.usageOf(slots)).reserved, 1);
      lease.actual(tpm, 320);
      seen = lease;
      return 'reply';
    });
  assert.equal(value, 'reply');
  assert.equal(seen.state, 'completed');
  assert.equal(seen.completion.reconciled, true);
  const u = await server.usageOf(tpm);
  assert.deepEqual([u.reserved, u.used], [0, 320]);
  assert.equal((await server.usageOf(slots)).reserved, 0);
});

test('a throw inside the callback releases every hold and is rethrown', async () => {
  const tpm = uniqueKey('tpm');
  const slots = uniqueKey('conc');
  await server.put(rolling(tpm, 1000));
  await server.put(concurrency(slots, 1));
  await assert.rejects(client.acquire({ [tpm]: 500, [slots]: 1 }, async () => {
    throw new Error('provider timed out');
  }), /provider timed out/);
  for (const key of [tpm, slots]) {
    const u = await server.usageOf(key);
    assert.deepEqual([u.reserved, u.used], [0, 0]);
  }
});

test('32 concurrent acquires on 3 slots through one client: never more than 3 inside, none leaked', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 3));
  let inside = 0;
  let peak = 0;
  const results = await Promise.all(Array.from({ length: 32 }, (_, i) =>
    client.acquire({ [key]: 1 }, { deadlineMs: 30_000 }, async () => {
      inside += 1;
      peak = Math.max(peak, inside);
      await sleep(20);
      inside -= 1;
      return i;
    })));
  assert.equal(results.length, 32);
  assert.ok(peak <= 3 && peak >= 2, String(peak));
  assert.equal((await server.usageOf(key)).reserved, 0);
});

test('a reserve waiting 5 s on a held slot is admitted when it is released, holding only it', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 1));
  const holder = (await client.reserve({ [key]: 1 })).leaseId;
  const releaser = (async () => {
    const queued = await server.waitQueued(1);
    await sleep(300);
    await client.release(holder);
    return queued;
  })();
  const r = await client.reserve({ [key]: 1 }, { waitMs: 5000 });
  assert.equal(await releaser, true);
  assert.equal(r.allowed, true);
  assert.ok(r.waitedMs > 0, String(r.waitedMs));
  assert.equal(r.queueFull, false);
  assert.equal((await server.usageOf(key)).reserved, 1);
  await client.release(r.leaseId);
  assert.equal((await server.usageOf(key)).reserved, 0);
});

test('a reserve waiting 1 s on a slot kept held is denied after waiting it all', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 1));
  const holder = (await client.reserve({ [key]: 1 })).leaseId;
  const r = await client.reserve({ [key]: 1 }, { waitMs: 1000 });
  assert.equal(r.allowed, false);
  assert.deepEqual([r.error, r.deniedKeys], ['', [key]]);
  assert.ok(r.waitedMs >= 1000, String(r.waitedMs));
  assert.ok(r.retryAfterMs > 0);
  assert.equal((await server.usageOf(key)).reserved, 1);
  await client.release(holder);
});

test('acquire with waitMs is admitted by its first request once the slot frees', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 1));
  const holder = (await client.reserve({ [key]: 1 })).leaseId;
  const proxy = await new FaultProxy(server).listen();
  let result;
  try {
    const releaser = (async () => {
      const queued = await server.waitQueued(1);
      await sleep(300);
      await client.release(holder);
      return queued;
    })();
    result = await new Client(proxy.url).acquire({ [key]: 1 },
      { deadlineMs: 10_000, waitMs: 10_000, priority: 1 }, async (lease) => lease.result);
    assert.equal(await releaser, true);
  } finally {
    await proxy.close();
  }
  const bodies = proxy.bodies('/v1/reserve');
  assert.equal(bodies.length, 1);
  assert.equal(bodies[0].lease_id, result.leaseId);
  assert.equal(bodies[0].priority, 1);
  assert.ok(bodies[0].wait_ms > 0 && bodies[0].wait_ms <= 10_000);
  assert.equal(result.allowed, true);
  assert.ok(result.waitedMs > 0, String(result.waitedMs));
  assert.equal((await server.usageOf(key)).reserved, 0);
});

test('an aborted waiting reserve leaves the server queue at once; nothing is held for it', async () => {
  const key = uniqueKey('conc');
  await server.put(concurrency(key, 1));
  const holder = (await client.reserve({ [key]: 1 })).leaseId;
  const controller = new AbortController();
  const waiting = client.reserve({ [key]: 1 }, { waitMs: 20_000, signal: controller.signal });
  assert.equal(await server.waitQueued(1), true);
  controller.abort(new Error('caller gave up'));
  await assert.rejects(waiting, /caller gave up/);
  assert.equal(await server.waitQueued(0), true);
  await client.release(holder);
  assert.equal((await server.usageOf(key)).reserved, 0);
});
