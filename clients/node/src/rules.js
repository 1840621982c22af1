// The retry rules of docs/semantics.md ("Unknown outcomes and pessimism") as
// pure helpers: bounds, waits, lease ids and answer parsing. client.js
// applies them.

import { randomBytes } from 'node:crypto';

export const DEFAULT_URL = 'http://127.0.0.1:8470';

// Deadlines (ms from each call) when the caller gives none.
export const RESERVE_DEADLINE_MS_DEFAULT = 10_000;
export const ACQUIRE_DEADLINE_MS_DEFAULT = 30_000;
export const FINALIZE_DEADLINE_MS_DEFAULT = 5_000; // complete, release, usage, admin

// One HTTP attempt never waits longer than this (or the time left).
export const ATTEMPT_TIMEOUT_MS_DEFAULT = 5_000;

// complete/release/usage/admin are tried at most this many times in all.
export const FINALIZE_ATTEMPTS_MAX = 5;

// Exponential backoff after an unknown outcome: base * 2^attempt, capped.
export const BACKOFF_BASE_MS = 50;
export const BACKOFF_MAX_MS = 2_000;

// A capacity denial waits retry_after_ms plus up to this fraction more, so
// callers denied together do not all come back in the same millisecond.
export const RETRY_AFTER_JITTER_FRACTION = 0.2;
export const RETRY_AFTER_WAIT_MS_MIN = 10;

// Statuses whose outcome is unknown: retried with the same lease id. 503 is
// llmlimitd's backend_error; the others come from proxies in between.
export const RETRYABLE_STATUSES = new Set([408, 429, 500, 502, 503, 504]);

// JSON numbers are exact up to 2^53-1 in JavaScript; amounts beyond that
// (the server allows up to 2^63-1) cannot be sent from here.
export const AMOUNT_MAX = Number.MAX_SAFE_INTEGER;

// Waiting on the server (docs/semantics.md, "Waiting for capacity"): a
// reserve may be held up to WAIT_MS_MAX until it fits; priority 0 goes first.
export const WAIT_MS_MAX = 60_000;
export const PRIORITY_MAX = 9;
export const PRIORITY_DEFAULT = 5;

/** The wait options of reserve and acquire, checked before sending. */
export function checkWait(waitMs, priority) {
  if (!Number.isInteger(waitMs)) throw new TypeError('waitMs: must be an integer 0..60000');
  if (waitMs < 0 || waitMs > WAIT_MS_MAX) throw new RangeError('waitMs: must be an integer 0..60000');
  if (!Number.isInteger(priority)) throw new TypeError('priority: must be an integer 0..9');
  if (priority < 0 || priority > PRIORITY_MAX) throw new RangeError('priority: must be an integer 0..9');
}

/**
 * What a waiting reserve asks the server for on one attempt: leftMs, what
 * is left of its wait, cut so that the answer still has one attempt
 * timeout before the deadline. 0 when it does not wait.
 */
export function waitMsForAttempt(leftMs, deadline, attemptTimeoutMs, nowMs) {
  const ms = Math.floor(Math.min(leftMs, deadline - nowMs - attemptTimeoutMs));
  return Math.max(0, Math.min(WAIT_MS_MAX, ms));
}

/** A new UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits. */
export function newLeaseId() {
  const bytes = randomBytes(16);
  let ms = Date.now();
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | (bytes[6] & 0x0f);
  bytes[8] = 0x80 | (bytes[8] & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Wait after the attempt-th unknown outcome: equal jitter, exponential bound. */
export function backoffMs(attempt) {
  const bound = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 30));
  return bound / 2 + Math.random() * (bound / 2);
}

/** Wait after a capacity denial: never earlier than the server said. */
export function retryAfterWaitMs(retryAfterMs) {
  const base = Math.max(retryAfterMs, 0);
  return Math.max(base * (1 + Math.random() * RETRY_AFTER_JITTER_FRACTION), RETRY_AFTER_WAIT_MS_MIN);
}

/** True when waiting retryAfterMs can turn the denial into an allowance. */
export function denialIsTemporary(result) {
  return result.error === '' || result.error.startsWith('limit_decreasing:');
}

/** Entries of a requirements/actuals argument: a plain object or a Map. */
export function entriesOf(amounts) {
  if (amounts == null) return [];
  return amounts instanceof Map ? [...amounts.entries()] : Object.entries(amounts);
}

export function checkActual(key, amount) {
  if (!Number.isSafeInteger(amount)) {
    throw new TypeError(`actual amount for ${JSON.stringify(key)} must be a safe integer`);
  }
  if (amount < 0) {
    throw new RangeError(`actual amount for ${JSON.stringify(key)} must be 0..${AMOUNT_MAX}`);
  }
}

export function reserveResult(leaseId, body, queueFull = false) {
  return {
    allowed: body.allowed === true,
    leaseId,
    retryAfterMs: Number(body.retry_after_ms ?? 0),
    reservedAtUnixMs: Number(body.reserved_at_unix_ms ?? 0),
    expiresAtUnixMs: Number(body.expires_at_unix_ms ?? 0),
    error: String(body.error ?? ''),
    deniedKeys: Array.isArray(body.denied_keys) ? body.denied_keys.map(String) : [],
    waitedMs: Number(body.waited_ms ?? 0),
    queueFull,
  };
}

export function completeResult(body) {
  return {
    ok: body.ok === true,
    reconciled: body.reconciled === true,
    warnings: Array.isArray(body.warnings) ? body.warnings.map(String) : [],
  };
}

export function usageResult(body) {
  return {
    key: body.key,
    kind: body.kind,
    status: body.status,
    capacity: body.capacity,
    reserved: body.reserved,
    used: body.used,
    debt: body.debt,
    available: body.available,
    periodStartUnixMs: body.period_start_unix_ms ?? 0,
    periodEndUnixMs: body.period_end_unix_ms ?? 0,
  };
}
