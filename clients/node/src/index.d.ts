// Types of the llmlimit Node client (see docs/client-node.md).

/** key -> amount. Amounts are integers in the limit's unit, 1..2^53-1 here. */
export type Amounts = Record<string, number> | Map<string, number>;

export interface ClientOptions {
  /** Bearer token for data routes; default $LLMLIMIT_CLIENT_TOKEN. */
  token?: string;
  /** Bearer token for admin routes; default $LLMLIMIT_ADMIN_TOKEN, then token. */
  adminToken?: string;
  /** Sent with every reserve for the audit log. */
  caller?: string;
  /** reserve deadline, ms from each call (default 10000). */
  deadlineMs?: number;
  /** acquire deadline, ms from each call (default 30000). */
  acquireDeadlineMs?: number;
  /** complete/release/usage/admin deadline (default 5000). */
  finalizeDeadlineMs?: number;
  /** One HTTP attempt waits at most this long (default 5000). */
  attemptTimeoutMs?: number;
  /** fetch implementation (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Called when a best-effort complete/release fails (default process.emitWarning). */
  onWarning?: (message: string) => void;
}

export interface CallOptions {
  /** Give up after this many ms (the client's default otherwise). */
  deadlineMs?: number;
  /** Abort waits and attempts; the call then rejects with signal.reason. */
  signal?: AbortSignal;
}

export interface WaitOptions {
  /**
   * 0..60000: when denied for capacity, the server may hold the reserve this
   * long and answer as soon as it fits (default 0: answered at once).
   * acquire: each lease may wait this long, never past the deadline.
   */
  waitMs?: number;
  /** 0..9, 0 first (default 5): the order among the waiters of a limit. */
  priority?: number;
}

export interface ReserveOptions extends CallOptions, WaitOptions {
  /** Use this lease id instead of a new UUIDv7 (1-128 of [A-Za-z0-9._:-]). */
  leaseId?: string;
  caller?: string;
}

export interface AcquireOptions extends CallOptions, WaitOptions {
  caller?: string;
}

export interface UsageOptions extends CallOptions {
  /** A budget reports the period containing this instant. */
  atUnixMs?: number;
}

/** A definitive reserve answer. error "" on a denial means capacity. */
export interface ReserveResult {
  allowed: boolean;
  leaseId: string;
  retryAfterMs: number;
  reservedAtUnixMs: number;
  expiresAtUnixMs: number;
  /** "", "unknown_limit_key: K", "limit_decreasing:K" or "exceeds_capacity:K". */
  error: string;
  deniedKeys: string[];
  /** How long the server held this reserve before answering (0: at once). */
  waitedMs: number;
  /** The server's queue of waiters was full: denied at once, without waiting. */
  queueFull: boolean;
}

export interface CompleteResult {
  ok: boolean;
  /** false when the server did not know the lease (nothing to reconcile). */
  reconciled: boolean;
  /** "commit_after_expiry:K", "overage_debt:K", "overage_denied:K". */
  warnings: string[];
}

export interface Usage {
  key: string;
  kind: 'rolling' | 'concurrency' | 'budget';
  status: 'active' | 'decreasing';
  capacity: number;
  reserved: number;
  used: number;
  debt: number;
  available: number;
  periodStartUnixMs: number;
  periodEndUnixMs: number;
}

export interface LimitDefinition {
  key: string;
  kind: 'rolling' | 'concurrency' | 'budget';
  capacity: number;
  window_seconds?: number;
  timeout_seconds?: number;
  period?: '' | 'day' | 'week' | 'month';
  unit?: string;
  description?: string;
  overage?: 'debt' | 'deny';
}

export interface LimitState {
  definition: Required<LimitDefinition>;
  status: 'active' | 'decreasing';
  pending_decrease_to: number;
}

export class Client {
  constructor(baseUrl?: string, options?: ClientOptions);
  caller: string | undefined;
  deadlineMs: number;
  acquireDeadlineMs: number;
  finalizeDeadlineMs: number;
  attemptTimeoutMs: number;

  /** Rejects with ApiError or Unavailable; a denial resolves (allowed: false). */
  reserve(requirements: Amounts, options?: ReserveOptions): Promise<ReserveResult>;
  /** Runs fn inside an allowed lease: completes after it, releases if it throws. */
  acquire<T>(requirements: Amounts, options: AcquireOptions,
             fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  acquire<T>(requirements: Amounts, fn: (lease: Lease) => T | Promise<T>): Promise<T>;
  /** Without fn: the Lease, to complete or release yourself. */
  acquire(requirements: Amounts, options?: AcquireOptions): Promise<Lease>;
  complete(leaseId: string, actuals?: Amounts, options?: CallOptions): Promise<CompleteResult>;
  release(leaseId: string, options?: CallOptions): Promise<void>;
  usage(key: string, options?: UsageOptions): Promise<Usage>;
  putLimit(definition: LimitDefinition, options?: CallOptions): Promise<'active' | 'decreasing'>;
  getLimit(key: string, options?: CallOptions): Promise<LimitState>;
  limits(options?: CallOptions): Promise<LimitState[]>;
  deleteLimit(key: string, options?: CallOptions): Promise<void>;
  warn(message: string): void;
}

export class Lease {
  readonly leaseId: string;
  readonly result: ReserveResult;
  readonly requirements: Record<string, number>;
  readonly actuals: Record<string, number>;
  completion: CompleteResult | undefined;
  state: 'held' | 'completed' | 'released';
  readonly expiresAtUnixMs: number;
  /** Records the real amount for a key of this lease (RangeError otherwise). */
  actual(key: string, amount: number): void;
  complete(actuals?: Amounts, options?: CallOptions): Promise<CompleteResult | undefined>;
  release(options?: CallOptions): Promise<void>;
  run<T>(fn: (lease: Lease) => T | Promise<T>): Promise<T>;
}

export class LlmlimitError extends Error {}

export class ApiError extends LlmlimitError {
  readonly status: number;
  readonly error: string;
  readonly body: unknown;
}

export class Unavailable extends LlmlimitError {
  readonly leaseId: string | undefined;
  readonly lastError: unknown;
}

export class Denied extends LlmlimitError {
  readonly result: ReserveResult;
  readonly error: string;
  readonly deniedKeys: string[];
  readonly retryAfterMs: number;
}

export class TransportError extends LlmlimitError {}

/** A new UUIDv7 lease id. */
export function newLeaseId(): string;
