// The retry rules on scripted answers from a fake fetch, without a server:
// which lease id each attempt carries, when the client waits and gives up.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ApiError, Client, Denied, Unavailable, newLeaseId } from '../src/index.js';
import * as rules from '../src/rules.js';

const ALLOWED = { allowed: true, retry_after_ms: 0, reserved_at_unix_ms: 5,
  expires_at_unix_ms: 60005, error: '', denied_keys: [] };
const denied = (error = '', retryAfterMs = 20) => ({ allowed: false,
  retry_after_ms: retryAfterMs, reserved_at_unix_ms: 0, expires_at_unix_ms: 0, error,
  denied_keys: ['k'] });

/**
 * A fetch answering from a script: [status, body, headers?, delayMs?] or an
 * Error to throw. A delayed answer gives up, as fetch does, when the
 * client's attempt timeout aborts it first.
 */
function scriptedFetch(script) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, method: init.method, body: init.body && JSON.parse(init.body) });
    const next = script.shift();
    if (next === undefined) throw new Error('script exhausted');
    if (next instanceof Error) throw next;
    const [status, body, headers = {}, delayMs = 0] = next;
    if (delayMs > 0) {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, delayMs);
        init.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(new DOMException('aborted', 'AbortError'));
        }, { once: true });
      });
    }
    return new Response(JSON.stringify(body), { status, headers });
  };
  return { fetch, calls };
}

const client = (fetch) => new Client('http://127.0.0.1:1', { fetch, onWarning() {} });

test('newLeaseId is an RFC 9562 version-7 UUID carrying the current time', () => {
  const before = Date.now();
  const id = newLeaseId();
  const after = Date.now();
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
  assert.ok(before <= ms && ms <= after);
});

test('ten thousand lease ids drawn in a tight loop are distinct', () => {
  const ids = new Set(Array.from({ length: 10000 }, newLeaseId));
  assert.equal(ids.size, 10000);
});

test('backoff stays within [bound/2, bound] of base*2^n, capped', () => {
  for (let attempt = 0; attempt < 12; attempt++) {
    const bound = Math.min(rules.BACKOFF_MAX_MS, rules.BACKOFF_BASE_MS * 2 ** attempt);
    for (let i = 0; i < 50; i++) {
      const wait = rules.backoffMs(attempt);
      assert.ok(wait >= bound / 2 && wait <= bound, `${attempt}: ${wait}`);
    }
  }
});

test('a capacity denial is never retried before retry_after_ms, at most 20% later', () => {
  for (let i = 0; i < 200; i++) {
    const wait = rules.retryAfterWaitMs(250);
    assert.ok(wait >= 250 && wait <= 300, String(wait));
  }
});

test('503, 502 and transport errors are retried with the same lease id', async () => {
  const { fetch, calls } = scriptedFetch([[503, { error: 'backend_error' }],
    new TypeError('fetch failed'), [502, {}], [200, ALLOWED]]);
  const result = await client(fetch).reserve({ k: 2 });
  assert.equal(result.allowed, true);
  assert.equal(calls.length, 4);
  assert.deepEqual(new Set(calls.map((c) => c.body.lease_id)), new Set([result.leaseId]));
  assert.deepEqual(calls[0].body.requirements, [{ key: 'k', amount: 2 }]);
});

test('a 409 lease_conflict rejects with ApiError after one attempt', async () => {
  const { fetch, calls } = scriptedFetch([[409, { error: 'lease_conflict' }]]);
  await assert.rejects(client(fetch).reserve({ k: 1 }),
    (e) => e instanceof ApiError && e.status === 409 && e.error === 'lease_conflict');
  assert.equal(calls.length, 1);
});

test('acquire retries a capacity denial with a new lease id after retry_after', async () => {
  const { fetch, calls } = scriptedFetch([[200, denied('', 100)], [200, ALLOWED]]);
  const started = performance.now();
  const lease = await client(fetch).acquire({ k: 1 });
  assert.ok(performance.now() - started >= 95);
  const ids = calls.map((c) => c.body.lease_id);
  assert.equal(ids.length, 2);
  assert.notEqual(ids[0], ids[1]);
  assert.equal(lease.leaseId, ids[1]);
});

test('acquire rejects unknown_limit_key and exceeds_capacity at once with Denied', async () => {
  for (const error of ['unknown_limit_key: k', 'exceeds_capacity:k']) {
    const { fetch, calls } = scriptedFetch([[200, denied(error, 0)]]);
    await assert.rejects(client(fetch).acquire({ k: 1 }, { deadlineMs: 10_000 }),
      (e) => e instanceof Denied && e.error === error);
    assert.equal(calls.length, 1);
  }
});

test('acquire waits out limit_decreasing and retries', async () => {
  const { fetch, calls } = scriptedFetch([[200, denied('limit_decreasing:k', 30)], [200, ALLOWED]]);
  const lease = await client(fetch).acquire({ k: 1 });
  assert.equal(lease.state, 'held');
  assert.equal(calls.length, 2);
});

test('acquire rejects with Denied at once when retry_after ends after the deadline', async () => {
  const { fetch, calls } = scriptedFetch([[200, denied('', 5000)]]);
  await assert.rejects(client(fetch).acquire({ k: 1 }, { deadlineMs: 1000 }),
    (e) => e instanceof Denied && e.retryAfterMs === 5000);
  assert.equal(calls.length, 1);
});

test('complete gives up with Unavailable after FINALIZE_ATTEMPTS_MAX attempts', async () => {
  const script = Array.from({ length: rules.FINALIZE_ATTEMPTS_MAX }, () => new TypeError('fetch failed'));
  const { fetch, calls } = scriptedFetch(script);
  await assert.rejects(client(fetch).complete('L', { k: 1 }),
    (e) => e instanceof Unavailable && e.leaseId === 'L');
  assert.equal(calls.length, rules.FINALIZE_ATTEMPTS_MAX);
});

test('an aborted signal stops the retries with the signal reason', async () => {
  const controller = new AbortController();
  const failing = async () => {
    throw new TypeError('fetch failed');
  };
  setTimeout(() => controller.abort(new Error('caller gave up')), 100);
  const started = performance.now();
  await assert.rejects(client(failing).reserve({ k: 1 }, { signal: controller.signal }),
    /caller gave up/);
  assert.ok(performance.now() - started < 1000);
});

test('lease.run completes with actuals and releases on a throw', async () => {
  const { fetch, calls } = scriptedFetch([[200, ALLOWED], [200, { ok: true, reconciled: true,
    warnings: [] }], [200, ALLOWED], [200, { ok: true }]]);
  const c = client(fetch);
  const value = await c.acquire({ k: 5 }, {}, async (lease) => {
    lease.actual('k', 3);
    assert.throws(() => lease.actual('other', 1), RangeError);
    assert.throws(() => lease.actual('k', -1), RangeError);
    assert.throws(() => lease.actual('k', 1.5), TypeError);
    return 'answer';
  });
  assert.equal(value, 'answer');
  await assert.rejects(c.acquire({ k: 5 }, {}, async () => {
    throw new Error('provider down');
  }), /provider down/);
  assert.deepEqual(calls.map((x) => x.url.replace('http://127.0.0.1:1', '')),
    ['/v1/reserve', '/v1/complete', '/v1/reserve', '/v1/release']);
  assert.deepEqual(calls[1].body.actuals, [{ key: 'k', actual_amount: 3 }]);
});

test('reserve with waitMs sends wait_ms and priority; the attempt outlasts the wait', async () => {
  // The answer comes 300 ms in, after the 100 ms one attempt gets: the wait
  // must extend the attempt, or it is cut and retried.
  const { fetch, calls } = scriptedFetch([[200, { ...ALLOWED, waited_ms: 300 }, {}, 300]]);
  const c = new Client('http://127.0.0.1:1', { fetch, onWarning() {}, attemptTimeoutMs: 100 });
  const result = await c.reserve({ k: 1 }, { waitMs: 1000, priority: 2, leaseId: 'L1' });
  assert.equal(calls.length, 1);
  assert.equal(calls[0].body.wait_ms, 1000); // the first attempt asks for the whole wait
  assert.equal(calls[0].body.priority, 2);
  assert.equal(calls[0].body.lease_id, 'L1');
  assert.deepEqual([result.allowed, result.waitedMs, result.queueFull], [true, 300, false]);
});

test('without a wait neither field is sent; a priority alone is', async () => {
  const { fetch, calls } = scriptedFetch([[200, ALLOWED], [200, ALLOWED]]);
  const c = client(fetch);
  const plain = await c.reserve({ k: 1 });
  await c.reserve({ k: 1 }, { priority: 0 });
  assert.equal('wait_ms' in calls[0].body || 'priority' in calls[0].body, false);
  assert.equal('wait_ms' in calls[1].body, false);
  assert.equal(calls[1].body.priority, 0);
  assert.deepEqual([plain.waitedMs, plain.queueFull], [0, false]);
});

test('x-llmlimit-queue: full is reported as queueFull on the denial', async () => {
  const { fetch } = scriptedFetch([[200, denied('', 250), { 'x-llmlimit-queue': 'full' }]]);
  const result = await client(fetch).reserve({ k: 1 }, { waitMs: 5000 });
  assert.deepEqual([result.allowed, result.queueFull, result.waitedMs], [false, true, 0]);
});

test('a wait longer than the deadline allows is cut to leave one attempt timeout', async () => {
  const { fetch, calls } = scriptedFetch([[200, ALLOWED]]);
  const c = new Client('http://127.0.0.1:1', { fetch, onWarning() {}, attemptTimeoutMs: 1000 });
  await c.reserve({ k: 1 }, { waitMs: 5000, deadlineMs: 3000 });
  assert.ok(calls[0].body.wait_ms > 0 && calls[0].body.wait_ms <= 2000, String(calls[0].body.wait_ms));
});

test('a 503 during a wait is retried with the same lease id, asking no more than is left', async () => {
  const { fetch, calls } = scriptedFetch([[503, { error: 'backend_error' }, {}, 50], [200, ALLOWED]]);
  await client(fetch).reserve({ k: 1 }, { waitMs: 4000, priority: 7 });
  assert.equal(calls.length, 2);
  assert.equal(calls[0].body.lease_id, calls[1].body.lease_id);
  assert.deepEqual(calls.map((x) => x.body.priority), [7, 7]);
  assert.equal(calls[0].body.wait_ms, 4000);
  assert.ok(calls[1].body.wait_ms <= 4000 - 50, String(calls[1].body.wait_ms));
});

test('acquire with waitMs waits on the server; after a denial a new lease waits again', async () => {
  const { fetch, calls } = scriptedFetch([[200, denied('', 30)], [200, { ...ALLOWED, waited_ms: 12 }]]);
  const lease = await client(fetch).acquire({ k: 1 }, { waitMs: 10_000, priority: 3 });
  assert.equal(calls.length, 2);
  assert.notEqual(calls[0].body.lease_id, calls[1].body.lease_id);
  for (const call of calls) {
    assert.ok(call.body.wait_ms > 0 && call.body.wait_ms <= 10_000);
    assert.equal(call.body.priority, 3);
  }
  assert.equal(lease.result.waitedMs, 12);
});

test('waitMs outside 0..60000 and priority outside 0..9 reject before sending, naming the field', async () => {
  const { fetch, calls } = scriptedFetch([]);
  const c = client(fetch);
  const bad = [
    [{ waitMs: -1 }, RangeError, /^waitMs/], [{ waitMs: 60_001 }, RangeError, /^waitMs/],
    [{ waitMs: 1.5 }, TypeError, /^waitMs/], [{ waitMs: '5' }, TypeError, /^waitMs/],
    [{ priority: -1 }, RangeError, /^priority/], [{ priority: 10 }, RangeError, /^priority/],
    [{ priority: 1.5 }, TypeError, /^priority/],
  ];
  for (const [options, type, field] of bad) {
    await assert.rejects(c.reserve({ k: 1 }, options), (e) => e instanceof type && field.test(e.message));
    await assert.rejects(c.acquire({ k: 1 }, options), (e) => e instanceof type && field.test(e.message));
  }
  assert.equal(calls.length, 0);
  assert.doesNotThrow(() => rules.checkWait(rules.WAIT_MS_MAX, rules.PRIORITY_MAX));
});
