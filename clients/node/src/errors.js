// Errors the llmlimit client throws. Every one extends LlmlimitError, so
// `err instanceof LlmlimitError` tells limiter trouble from the caller's own.

export class LlmlimitError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** llmlimitd gave a definitive non-200 answer (400, 401, 404, 409, 413). */
export class ApiError extends LlmlimitError {
  constructor(status, error, body) {
    super(`HTTP ${status}: ${error}`);
    this.status = status;
    this.error = error;
    this.body = body;
  }
}

/**
 * No definitive answer before the deadline (or the attempt budget). For
 * reserve the outcome is unknown: the lease may be held, and if so it
 * expires by itself. Do not make the LLM call.
 */
export class Unavailable extends LlmlimitError {
  constructor(message, leaseId, lastError) {
    super(lastError === undefined ? message : `${message} (last error: ${describe(lastError)})`,
      lastError instanceof Error ? { cause: lastError } : undefined);
    this.leaseId = leaseId;
    this.lastError = lastError;
  }
}

/**
 * acquire got no allowed reservation by its deadline, or the denial can
 * never turn into an allowance (unknown_limit_key, exceeds_capacity).
 * Nothing is held.
 */
export class Denied extends LlmlimitError {
  constructor(result) {
    super(`denied (${result.error || 'capacity'}): ${result.deniedKeys.join(', ')}`);
    this.result = result;
    this.error = result.error;
    this.deniedKeys = [...result.deniedKeys];
    this.retryAfterMs = result.retryAfterMs;
  }
}

/** One HTTP attempt ended without an answer (refused, reset, timed out). */
export class TransportError extends LlmlimitError {}

function describe(value) {
  if (value instanceof Error) {
    const cause = value.cause instanceof Error ? `: ${value.cause.message}` : '';
    return `${value.message}${cause}`;
  }
  return String(value);
}
