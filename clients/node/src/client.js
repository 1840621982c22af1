// The llmlimit client for Node 18+: reserve, acquire, complete, release,
// usage, over the global fetch (keep-alive). No shared mutable state, so one
// Client serves any number of concurrent calls.

import { ApiError, Denied, TransportError, Unavailable } from './errors.js';
import * as rules from './rules.js';

const USER_AGENT = 'llmlimit-node/0.1';
const now = () => performance.now();

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    signal?.throwIfAborted();
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function parseAnswer(status, text, queueFull = false) {
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const isObject = body !== null && typeof body === 'object' && !Array.isArray(body);
  const error = isObject ? String(body.error ?? '') : text.trim().slice(0, 200);
  return { status, body: isObject ? body : null, error, queueFull };
}

/** The wait options of a reserve or acquire call, checked. */
function waitOf(options) {
  const wait = { waitMs: options.waitMs ?? 0, priority: options.priority ?? rules.PRIORITY_DEFAULT };
  rules.checkWait(wait.waitMs, wait.priority);
  return wait;
}

export class Client {
  #base;
  #token;
  #adminToken;
  #fetch;
  #onWarning;

  /**
   * baseUrl defaults to $LLMLIMIT_URL, then http://127.0.0.1:8470; token to
   * $LLMLIMIT_CLIENT_TOKEN; adminToken (admin routes only) to
   * $LLMLIMIT_ADMIN_TOKEN, then token.
   */
  constructor(baseUrl, options = {}) {
    const base = new URL(baseUrl ?? process.env.LLMLIMIT_URL ?? rules.DEFAULT_URL);
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError(`baseUrl must be http:// or https://: ${baseUrl}`);
    }
    this.#base = base.href.replace(/\/+$/, '');
    this.#token = options.token ?? process.env.LLMLIMIT_CLIENT_TOKEN;
    this.#adminToken = options.adminToken ?? process.env.LLMLIMIT_ADMIN_TOKEN ?? this.#token;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#onWarning = options.onWarning ?? ((message) => process.emitWarning(message, 'LlmlimitWarning'));
    this.caller = options.caller;
    this.deadlineMs = options.deadlineMs ?? rules.RESERVE_DEADLINE_MS_DEFAULT;
    this.acquireDeadlineMs = options.acquireDeadlineMs ?? rules.ACQUIRE_DEADLINE_MS_DEFAULT;
    this.finalizeDeadlineMs = options.finalizeDeadlineMs ?? rules.FINALIZE_DEADLINE_MS_DEFAULT;
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? rules.ATTEMPT_TIMEOUT_MS_DEFAULT;
  }

  /**
   * One reservation across every key (key -> amount), all or nothing.
   * Retries with the same lease id on transport errors, timeouts and 503
   * until a definitive answer or the deadline. Resolves to the answer,
   * allowed or denied; rejects with ApiError (400, 401, 409 lease_conflict)
   * or Unavailable (no definitive answer by the deadline).
   *
   * waitMs (0..60000): when denied for capacity, the server may hold the
   * reserve that long and answer as soon as it fits (waitedMs says how long
   * it waited, queueFull that it had too many waiters and answered at
   * once); priority 0..9, 0 first (default 5), orders the waiters of a
   * limit. Without deadlineMs the deadline is waitMs plus the client's;
   * with one, the wait is cut to leave one attempt timeout before it.
   */
  async reserve(requirements, options = {}) {
    const wait = waitOf(options);
    const deadline = now() + (options.deadlineMs ?? this.deadlineMs + wait.waitMs);
    const leaseId = options.leaseId ?? rules.newLeaseId();
    return this.#reserveOnce(requirements, leaseId, deadline, options, wait);
  }

  /**
   * Reserves until allowed: after a capacity denial waits retryAfterMs (with
   * jitter) and tries again with a new lease id. With fn, runs fn(lease),
   * then completes with the actuals recorded by lease.actual() and resolves
   * to fn's result; if fn throws, releases and rethrows. Without fn,
   * resolves to the Lease. Rejects with Denied if not allowed by the
   * deadline (or never can be), Unavailable, or ApiError.
   *
   * With waitMs > 0 each lease first waits on the server (up to waitMs and
   * what the deadline leaves, less one attempt timeout) and is admitted the
   * moment capacity frees, by priority then arrival.
   */
  async acquire(requirements, options = {}, fn = undefined) {
    if (typeof options === 'function') [fn, options] = [options, {}];
    const wait = waitOf(options);
    const deadline = now() + (options.deadlineMs ?? this.acquireDeadlineMs);
    for (;;) {
      const result = await this.#reserveOnce(requirements, rules.newLeaseId(), deadline, options,
        wait);
      if (result.allowed) {
        const lease = new Lease(this, result, requirements);
        return fn ? lease.run(fn) : lease;
      }
      if (!rules.denialIsTemporary(result)) throw new Denied(result);
      const waitMs = rules.retryAfterWaitMs(result.retryAfterMs);
      // Nothing can be admitted before then: fail now, not at the deadline.
      if (now() + waitMs >= deadline) throw new Denied(result);
      await sleep(waitMs, options.signal);
    }
  }

  /**
   * Reconciles a lease with what was really used (key -> actual amount;
   * keys left out settle at their reserved amount). Bounded retries.
   * Rejects with ApiError (409 already_finalized, 400
   * actual_key_not_in_lease:K) or Unavailable.
   */
  async complete(leaseId, actuals = {}, options = {}) {
    const list = rules.entriesOf(actuals).map(([key, amount]) => {
      rules.checkActual(key, amount);
      return { key, actual_amount: amount };
    });
    const body = { lease_id: leaseId, actuals: list };
    const answer = await this.#finalize('POST', '/v1/complete', body, options, false, leaseId);
    return rules.completeResult(answer);
  }

  /** Frees every hold of a lease whose call was never made. Bounded retries. */
  async release(leaseId, options = {}) {
    await this.#finalize('POST', '/v1/release', { lease_id: leaseId }, options, false, leaseId);
  }

  /** Usage of one limit (a budget: of the period containing atUnixMs). */
  async usage(key, options = {}) {
    let path = `/v1/usage/${encodeURIComponent(key)}`;
    if (options.atUnixMs !== undefined) path += `?at_unix_ms=${options.atUnixMs}`;
    return rules.usageResult(await this.#finalize('GET', path, undefined, options));
  }

  /** Creates or changes a limit; resolves to "active" or "decreasing". */
  async putLimit(definition, options = {}) {
    const answer = await this.#finalize('PUT', '/v1/admin/limits', definition, options, true);
    return answer.status;
  }

  async getLimit(key, options = {}) {
    const path = `/v1/admin/limits/${encodeURIComponent(key)}`;
    return (await this.#finalize('GET', path, undefined, options, true)).limit;
  }

  async limits(options = {}) {
    return (await this.#finalize('GET', '/v1/admin/limits', undefined, options, true)).limits;
  }

  async deleteLimit(key, options = {}) {
    const path = `/v1/admin/limits/${encodeURIComponent(key)}`;
    await this.#finalize('DELETE', path, undefined, options, true);
  }

  /** Reports a best-effort step that failed (default: process.emitWarning). */
  warn(message) {
    this.#onWarning(message);
  }

  async #reserveOnce(requirements, leaseId, deadline, options, wait) {
    const list = rules.entriesOf(requirements).map(([key, amount]) => ({ key, amount }));
    if (list.length === 0) throw new TypeError('requirements: at least one key is needed');
    const body = { lease_id: leaseId, requirements: list };
    const caller = options.caller ?? this.caller;
    if (caller) body.caller = caller;
    if (wait.priority !== rules.PRIORITY_DEFAULT) body.priority = wait.priority;
    const call = { method: 'POST', path: '/v1/reserve', body, admin: false, waitMs: wait.waitMs };
    const answer = await this.#request(call, deadline, undefined, leaseId, options.signal);
    if (!('allowed' in answer.body)) {
      throw new Unavailable('reserve: answer without "allowed"', leaseId, JSON.stringify(answer.body));
    }
    return rules.reserveResult(leaseId, answer.body, answer.queueFull);
  }

  async #finalize(method, path, body, options, admin = false, leaseId = undefined) {
    const deadline = now() + (options.deadlineMs ?? this.finalizeDeadlineMs);
    const call = { method, path, body, admin, waitMs: 0 };
    const answer = await this.#request(call, deadline, rules.FINALIZE_ATTEMPTS_MAX, leaseId,
      options.signal);
    return answer.body;
  }

  /**
   * Attempts call until a definitive answer (resolved to whole: status,
   * body, queueFull), the deadline, or attemptsMax attempts (undefined:
   * only the deadline counts). The body is sent unchanged every time, so a
   * reserve keeps its lease id; with call.waitMs each attempt asks the
   * server to hold it (the whole wait first, then what is left of it) and
   * is given that much more time.
   */
  async #request(call, deadline, attemptsMax, leaseId, signal) {
    let last;
    const waitEnd = now() + call.waitMs;
    for (let attempt = 0; attemptsMax === undefined || attempt < attemptsMax;) {
      const started = now();
      const remainingMs = deadline - started;
      if (remainingMs <= 0) break;
      const leftMs = attempt === 0 ? call.waitMs : waitEnd - started;
      const waitMs = rules.waitMsForAttempt(leftMs, deadline, this.attemptTimeoutMs, started);
      const sent = waitMs > 0 ? { ...call, body: { ...call.body, wait_ms: waitMs } } : call;
      // The server answers a waiting reserve only after its wait: an
      // attempt cut before that would be retried for nothing.
      const timeoutMs = Math.min(this.attemptTimeoutMs + waitMs, remainingMs);
      const outcome = await this.#attempt(sent, timeoutMs, signal);
      if (outcome instanceof TransportError) {
        last = outcome;
      } else if (outcome.status === 200 && outcome.body !== null) {
        return outcome;
      } else if (outcome.status !== 200 && !rules.RETRYABLE_STATUSES.has(outcome.status)) {
        throw new ApiError(outcome.status, outcome.error, outcome.body);
      } else {
        last = `HTTP ${outcome.status} ${outcome.error}`;
      }
      attempt += 1;
      if (attemptsMax === undefined || attempt < attemptsMax) {
        await sleep(Math.max(0, Math.min(rules.backoffMs(attempt - 1), deadline - now())), signal);
      }
    }
    throw new Unavailable(`${call.method} ${call.path}: no definitive answer`, leaseId, last);
  }

  /** One HTTP attempt: an answer, or a TransportError (returned, not thrown). */
  async #attempt(call, timeoutMs, signal) {
    signal?.throwIfAborted();
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const headers = { 'user-agent': USER_AGENT, accept: 'application/json' };
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    const token = call.admin ? this.#adminToken : this.#token;
    if (token) headers.authorization = `Bearer ${token}`;
    try {
      const response = await this.#fetch(this.#base + call.path, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: controller.signal,
      });
      const queueFull = (response.headers.get('x-llmlimit-queue') ?? '').trim().toLowerCase() === 'full';
      return parseAnswer(response.status, await response.text(), queueFull);
    } catch (error) {
      signal?.throwIfAborted();
      const why = controller.signal.aborted ? `timed out after ${Math.round(timeoutMs)} ms` : 'failed';
      return new TransportError(`${call.method} ${call.path} ${why}`, { cause: error });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }
}

/** An allowed reservation from Client.acquire. */
export class Lease {
  #client;

  constructor(client, result, requirements) {
    this.#client = client;
    this.result = result;
    this.leaseId = result.leaseId;
    this.requirements = Object.fromEntries(rules.entriesOf(requirements));
    this.actuals = {};
    this.completion = undefined;
    this.state = 'held'; // then 'completed' or 'released'
  }

  get expiresAtUnixMs() {
    return this.result.expiresAtUnixMs;
  }

  /** Records what the call really used for key (replaces an earlier value). */
  actual(key, amount) {
    if (!Object.hasOwn(this.requirements, key)) {
      throw new RangeError(`${JSON.stringify(key)} is not a key of lease ${this.leaseId}`);
    }
    rules.checkActual(key, amount);
    this.actuals[key] = amount;
  }

  /** Completes now; resolves to undefined if the lease was already finished. */
  async complete(actuals = {}, options = {}) {
    for (const [key, amount] of rules.entriesOf(actuals)) this.actual(key, amount);
    if (this.state !== 'held') return undefined;
    this.state = 'completed';
    this.completion = await this.#client.complete(this.leaseId, this.actuals, options);
    return this.completion;
  }

  /** Releases now (the call was not made). No-op if already finished. */
  async release(options = {}) {
    if (this.state !== 'held') return;
    this.state = 'released';
    await this.#client.release(this.leaseId, options);
  }

  /**
   * Runs fn(lease), then completes; releases if fn throws. Finishing is
   * best effort and never throws: the call already happened (or fn's own
   * error is on its way out).
   */
  async run(fn) {
    let value;
    try {
      value = await fn(this);
    } catch (error) {
      await this.#quietly(() => this.release(), 'release');
      throw error;
    }
    await this.#quietly(() => this.complete(), 'complete');
    return value;
  }

  async #quietly(step, what) {
    try {
      await step();
    } catch (error) {
      this.#client.warn(`llmlimit: ${what} of lease ${this.leaseId} failed (${error.message}); its holds expire by themselves`);
    }
  }
}
