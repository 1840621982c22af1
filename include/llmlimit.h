/* libllmlimit: the C client of llmlimitd. Reserves capacity across several
 * limits before an LLM call and reconciles it after, with the retry rules of
 * the error model (reserve retries with the same lease_id; acquire waits and
 * retries a capacity denial with a new one; complete/release are best effort).
 *
 * Memory: the library allocates only inside the calls below. Every result a
 * call fills lives in memory the caller provides, except where a function
 * says "caller frees with ..." next to its declaration. Strings passed in are
 * copied or used only during the call.
 *
 * Threads: one struct llmlimit_client may be used by any number of threads
 * at the same time. The library keeps no global state of its own; it calls
 * curl_global_init() in llmlimit_client_new() and curl_global_cleanup() in
 * llmlimit_client_free(), which libcurl >= 7.84 makes thread-safe and
 * reference-counted. A program that also uses libcurl itself, or links an
 * older libcurl, calls curl_global_init(CURL_GLOBAL_DEFAULT) once in main()
 * before starting threads.
 *
 * Errors: every function that can fail returns 0 on success or one of the
 * negative LLMLIMIT_ERR_* codes below; llmlimit_strerror() names them. Calls
 * that talk to the server also fill an optional struct llmlimit_status with
 * the last HTTP status and the server's (or the transport's) message. */
#ifndef LLMLIMIT_H
#define LLMLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LLMLIMIT_API __attribute__((visibility("default")))
#else
#define LLMLIMIT_API
#endif

#define LLMLIMIT_VERSION "0.1.0"

/* Bounds the server enforces (docs/api.md), so callers can size
 * buffers; the library checks them before sending. Lengths exclude the NUL. */
#define LLMLIMIT_KEY_LENGTH_MAX 256
#define LLMLIMIT_LEASE_ID_LENGTH_MAX 128
#define LLMLIMIT_CALLER_LENGTH_MAX 256
#define LLMLIMIT_REQUIREMENTS_MAX 64         /* per reserve (and actuals per complete) */
#define LLMLIMIT_BATCH_ITEMS_MAX 8189        /* requests in one batch */
#define LLMLIMIT_BATCH_REQUIREMENTS_MAX 8189 /* requirements (or actuals) in one batch */
#define LLMLIMIT_AMOUNT_MAX ((uint64_t)INT64_MAX)
#define LLMLIMIT_ERROR_SIZE 512 /* holds any server error string, NUL included */
#define LLMLIMIT_UUID_SIZE 37   /* a UUID in text form plus its NUL */

/* Error codes. 0 is success; every error is negative. */
enum llmlimit_error {
    LLMLIMIT_OK = 0,
    /* Caught before anything was sent: NULL where a value is required, a
     * lease_id or key of bad syntax or length, a count out of bounds, an
     * amount out of range, an unusable URL. */
    LLMLIMIT_ERR_INVALID_ARGUMENT = -1,
    LLMLIMIT_ERR_NO_MEMORY = -2,
    /* No HTTP answer: connection refused or reset, name resolution, an
     * attempt that timed out. The outcome on the server is unknown. */
    LLMLIMIT_ERR_TRANSPORT = -3,
    /* HTTP 503 backend_error (or another 5xx): the outcome is unknown. */
    LLMLIMIT_ERR_UNAVAILABLE = -4,
    /* The caller's deadline passed before a definitive answer. For a reserve
     * the outcome is unknown: do not make the call; any hold expires by
     * itself. For an acquire the last answer was a capacity denial (see the
     * result) or an unknown outcome (see the status). */
    LLMLIMIT_ERR_DEADLINE = -5,
    LLMLIMIT_ERR_BAD_REQUEST = -6,  /* HTTP 400; the status message names the field */
    LLMLIMIT_ERR_UNAUTHORIZED = -7, /* HTTP 401: missing or wrong token */
    LLMLIMIT_ERR_NOT_FOUND = -8,    /* HTTP 404: unknown limit key (or route) */
    /* HTTP 409: lease_conflict (the lease_id was used with other
     * requirements) or already_finalized (complete after release, release
     * after complete). */
    LLMLIMIT_ERR_CONFLICT = -9,
    LLMLIMIT_ERR_TOO_LARGE = -10, /* HTTP 413: the body is over the server's limit */
    /* The server answered something this library does not understand: an
     * unexpected status, a body that is not the documented JSON. */
    LLMLIMIT_ERR_PROTOCOL = -11,
    /* acquire only: a definitive denial that waiting cannot fix
     * (unknown_limit_key, exceeds_capacity, or another error string); the
     * result's error says which. */
    LLMLIMIT_ERR_REJECTED = -12,
    LLMLIMIT_ERR_SYSTEM = -13, /* the OS failed us (getrandom, clock, threads) */
};

/* A static English description of an error code ("unknown error" for codes
 * it does not know). Never NULL; never freed. */
LLMLIMIT_API const char *llmlimit_strerror(int error);

/* What the server (or the transport) last said during a call. Every call
 * that takes one fills it on every return, success included. */
struct llmlimit_status {
    int http_status;   /* of the last answer; 0 when none was received */
    uint32_t attempts; /* HTTP requests sent during the call */
    /* The "error" string of the last answer, or the transport's reason
     * ("Couldn't connect to server"); "" when there was none. */
    char error[LLMLIMIT_ERROR_SIZE];
};

/* ---- client ---------------------------------------------------------- */

struct llmlimit_options {
    /* One HTTP attempt, connect included (default 2000). */
    int64_t attempt_timeout_ms;
    /* Connection set-up (default 1000). */
    int64_t connect_timeout_ms;
    /* Deadline of a reserve/acquire/batch/complete/release called with
     * timeout_ms = 0 (default 10000). */
    int64_t default_timeout_ms;
    /* Retry backoff of unknown outcomes: the n-th wait is a random time in
     * [base/2, base] with base = backoff_initial_ms * 2^n capped at
     * backoff_max_ms (defaults 10 and 1000). */
    int64_t backoff_initial_ms;
    int64_t backoff_max_ms;
    /* Attempts of complete and release before giving up (default 5). */
    uint32_t finalize_attempts_max;
    /* Keep-alive connections kept for the threads that share the client; a
     * thread that finds them all busy waits for one (default 8). */
    uint32_t connections_max;
};

/* Fills options with the defaults above. */
LLMLIMIT_API void llmlimit_options_defaults(struct llmlimit_options *options);

struct llmlimit_client; /* opaque */

/* A new client for the server at url ("http://127.0.0.1:8470", no path;
 * https:// works if libcurl supports it). token is sent as
 * "Authorization: Bearer <token>" (NULL or "" sends none). options may be
 * NULL (defaults). url and token are copied. Nothing is sent yet.
 * Returns 0 and *out, which the caller frees with llmlimit_client_free();
 * LLMLIMIT_ERR_INVALID_ARGUMENT (NULL url or out, a url not starting with
 * http:// or https://, a token with control characters, a zero or negative
 * option), LLMLIMIT_ERR_NO_MEMORY, LLMLIMIT_ERR_SYSTEM (libcurl or mutex set-up). */
LLMLIMIT_API int llmlimit_client_new(const char *url, const char *token,
                                     const struct llmlimit_options *options,
                                     struct llmlimit_client **out);

/* Closes the connections and frees the client. No call may be running on
 * it. NULL is a no-op. */
LLMLIMIT_API void llmlimit_client_free(struct llmlimit_client *client);

/* ---- lease ids --------------------------------------------------------- */

/* Writes a new UUIDv7 (RFC 9562: 48-bit unix milliseconds, then 74 random
 * bits from getrandom) as 36 lower-case characters and a NUL into out.
 * Returns 0, or LLMLIMIT_ERR_SYSTEM if the clock or getrandom failed. */
LLMLIMIT_API int llmlimit_lease_id_new(char out[LLMLIMIT_UUID_SIZE]);

/* ---- reserve ----------------------------------------------------------- */

struct llmlimit_requirement {
    const char *key; /* 1..LLMLIMIT_KEY_LENGTH_MAX bytes */
    uint64_t amount; /* 1..LLMLIMIT_AMOUNT_MAX, in the limit's unit */
};

struct llmlimit_reserve_request {
    /* 1..LLMLIMIT_LEASE_ID_LENGTH_MAX bytes of [A-Za-z0-9._:-], or NULL to
     * have the library pick a UUIDv7 (reported in the result). */
    const char *lease_id;
    const struct llmlimit_requirement *requirements; /* keys unique */
    size_t requirement_count;                        /* 1..LLMLIMIT_REQUIREMENTS_MAX */
    const char *caller; /* NULL, or who makes the call (audit log, per-caller usage) */
};

struct llmlimit_reserve_result {
    /* The lease this answer is about: the request's, or the one the
     * library generated (acquire: the lease of the last attempt). */
    char lease_id[LLMLIMIT_LEASE_ID_LENGTH_MAX + 1];
    bool allowed;
    /* On a denial: when the same request could fit if nothing else changes
     * (0 when it never can, e.g. exceeds_capacity). */
    int64_t retry_after_ms;
    int64_t reserved_at_unix_ms; /* when allowed */
    int64_t expires_at_unix_ms;  /* earliest expiry among the holds */
    /* Bit i set: requirements[i] did not fit (or is the key the error
     * names). 64 bits because a reserve has at most 64 requirements. */
    uint64_t denied_mask;
    /* HTTP status of this answer (batch items: the status the single call
     * would have had; 200 for every definitive reserve answer). */
    int http_status;
    /* "" when allowed or denied for capacity; else the server's error:
     * "unknown_limit_key: <key>", "limit_decreasing:<key>",
     * "exceeds_capacity:<key>", or for a batch item that was not a 200 the
     * error of that item ("lease_conflict", a 400 message, ...). */
    char error[LLMLIMIT_ERROR_SIZE];
    /* The error read once as a value (LLMLIMIT_DENIAL_*). */
    int denial;
};

/* What the error of a reserve answer says (llmlimit_reserve_result.denial). */
enum {
    LLMLIMIT_DENIAL_NONE = 0,          /* allowed, or denied for capacity: error is "" */
    LLMLIMIT_DENIAL_UNKNOWN_LIMIT_KEY, /* a key names no limit: fix the request */
    LLMLIMIT_DENIAL_LIMIT_DECREASING,  /* a limit is shrinking: retry after retry_after_ms */
    LLMLIMIT_DENIAL_EXCEEDS_CAPACITY,  /* an amount can never fit */
    LLMLIMIT_DENIAL_OTHER,             /* another error (a batch item that was not a 200) */
};

/* Reserves every requirement atomically, or none. Retries transport
 * errors, attempt timeouts and 5xx answers with the SAME lease_id
 * (exponential backoff with jitter) until a definitive answer or until
 * timeout_ms has passed (0: the client's default_timeout_ms).
 * Returns 0 when the server gave a definitive answer: result->allowed says
 * whether the caller may proceed; a denial (capacity, unknown key, ...) is a
 * 0 return with allowed false. Errors: LLMLIMIT_ERR_INVALID_ARGUMENT,
 * LLMLIMIT_ERR_NO_MEMORY, LLMLIMIT_ERR_DEADLINE (no definitive answer in
 * time: outcome unknown, do not proceed), LLMLIMIT_ERR_BAD_REQUEST,
 * LLMLIMIT_ERR_UNAUTHORIZED, LLMLIMIT_ERR_CONFLICT (lease_conflict),
 * LLMLIMIT_ERR_TOO_LARGE, LLMLIMIT_ERR_NOT_FOUND, LLMLIMIT_ERR_PROTOCOL,
 * LLMLIMIT_ERR_SYSTEM. result and status (NULL allowed) are always filled. */
LLMLIMIT_API int llmlimit_reserve(struct llmlimit_client *client,
                                  const struct llmlimit_reserve_request *request,
                                  int64_t timeout_ms, struct llmlimit_reserve_result *result,
                                  struct llmlimit_status *status);

/* What most callers want: reserve; on a capacity denial (or
 * limit_decreasing) wait retry_after_ms (with jitter, at least the
 * backoff_initial_ms) and reserve again with a NEW lease_id, until allowed
 * or until timeout_ms has passed (0: default_timeout_ms). The first attempt
 * uses request->lease_id if set. Returns 0 when allowed (result->lease_id is
 * the lease to complete or release); LLMLIMIT_ERR_REJECTED at once on a
 * definitive error that waiting cannot fix (unknown_limit_key,
 * exceeds_capacity: see result->error); LLMLIMIT_ERR_DEADLINE when time ran
 * out, either while denied (result->http_status 200: the last denial) or
 * while the last attempt had no definitive answer (result->http_status not
 * 200: see status); and the other errors of llmlimit_reserve(). It returns
 * DEADLINE as soon as the server's retry_after_ms says the next attempt
 * would come after the deadline. */
LLMLIMIT_API int llmlimit_acquire(struct llmlimit_client *client,
                                  const struct llmlimit_reserve_request *request,
                                  int64_t timeout_ms, struct llmlimit_reserve_result *result,
                                  struct llmlimit_status *status);

/* ---- waiting on the server instead of being denied ----------------------- */

/* A reserve denied for capacity may wait on the server until it fits
 * instead of being answered at once (docs/semantics.md "Waiting for
 * capacity"). These calls add that to reserve and acquire; the structs
 * above keep their layout, so programs built against an older header keep
 * working with this library. */
#define LLMLIMIT_WAIT_MS_MAX 60000 /* the server's bound on wait_ms */
#define LLMLIMIT_PRIORITY_MAX 9    /* priorities are 0 (first) .. 9 */
#define LLMLIMIT_PRIORITY_DEFAULT 5

struct llmlimit_wait_options {
    /* 0..LLMLIMIT_WAIT_MS_MAX: how long the server may hold one reserve
     * until it fits (0: answered at once, as llmlimit_reserve). */
    int64_t wait_ms;
    /* 0..LLMLIMIT_PRIORITY_MAX, 0 first: the order among waiters of one
     * limit. A zeroed struct asks for priority 0: start from
     * llmlimit_wait_options_defaults(). */
    int32_t priority;
};

/* Fills options with wait_ms 0 and priority LLMLIMIT_PRIORITY_DEFAULT. */
LLMLIMIT_API void llmlimit_wait_options_defaults(struct llmlimit_wait_options *options);

/* How the last reserve answer went on the server. */
struct llmlimit_wait_result {
    int64_t waited_ms; /* how long the server held it (0: answered at once) */
    /* The server's queue of waiters was full ("x-llmlimit-queue: full"): a
     * denial came at once, without waiting. */
    bool queue_full;
};

/* llmlimit_reserve(), waiting on the server: wait (NULL: the defaults,
 * i.e. llmlimit_reserve) says how long and at which priority. timeout_ms =
 * 0 means wait->wait_ms plus the client's default_timeout_ms. Each HTTP
 * attempt gets wait_ms more than attempt_timeout_ms, so the client never
 * cuts a wait short; the wait asked of the server is cut so that its answer
 * still has attempt_timeout_ms before the deadline, and a retry (unknown
 * outcome, same lease id) asks only for what is left of wait_ms. A
 * waiting reserve holds one of the client's connections_max connections.
 * waited (NULL allowed) is filled on every return. Errors: those of
 * llmlimit_reserve(); LLMLIMIT_ERR_INVALID_ARGUMENT also for wait_ms or
 * priority out of range, with status->error naming the field. */
LLMLIMIT_API int llmlimit_reserve_wait(struct llmlimit_client *client,
                                       const struct llmlimit_reserve_request *request,
                                       const struct llmlimit_wait_options *wait, int64_t timeout_ms,
                                       struct llmlimit_reserve_result *result,
                                       struct llmlimit_wait_result *waited,
                                       struct llmlimit_status *status);

/* llmlimit_acquire(), waiting on the server: with wait->wait_ms > 0 each
 * attempt asks the server to hold it until it fits, up to wait_ms and what
 * is left of timeout_ms (less one attempt_timeout_ms for the answer), so
 * the reserve is admitted the moment capacity frees, in the server's
 * priority-then-arrival order, instead of at the client's next retry
 * (LLMLIMIT_WAIT_MS_MAX: as long as the deadline allows). A denial after
 * the wait, or at once because the server's queue was full, goes on as in
 * llmlimit_acquire(): sleep retry_after_ms, new lease id, try again.
 * timeout_ms = 0 means default_timeout_ms. waited (NULL allowed) tells how
 * the last answer went. Returns and errors: those of llmlimit_acquire()
 * and llmlimit_reserve_wait(). */
LLMLIMIT_API int llmlimit_acquire_wait(struct llmlimit_client *client,
                                       const struct llmlimit_reserve_request *request,
                                       const struct llmlimit_wait_options *wait, int64_t timeout_ms,
                                       struct llmlimit_reserve_result *result,
                                       struct llmlimit_wait_result *waited,
                                       struct llmlimit_status *status);

/* ---- complete and release --------------------------------------------- */

struct llmlimit_actual {
    const char *key;        /* a key of the lease */
    uint64_t actual_amount; /* 0..LLMLIMIT_AMOUNT_MAX */
};

struct llmlimit_complete_request {
    const char *lease_id;
    /* 0..LLMLIMIT_REQUIREMENTS_MAX; keys of the lease left out are settled
     * at their reserved amount. */
    const struct llmlimit_actual *actuals;
    size_t actual_count;
};

#define LLMLIMIT_WARNING_COMMIT_AFTER_EXPIRY 1u /* "commit_after_expiry:<key>" */
#define LLMLIMIT_WARNING_OVERAGE_DEBT 2u        /* "overage_debt:<key>" */
#define LLMLIMIT_WARNING_OVERAGE_DENIED 4u      /* "overage_denied:<key>" */

struct llmlimit_complete_result {
    /* false: the server did not know the lease (it expired long ago or was
     * never reserved); nothing was done. */
    bool reconciled;
    uint32_t warning_flags; /* LLMLIMIT_WARNING_* of the warnings below */
    size_t warning_count;
    /* warning_count strings such as "overage_debt:<key>", or NULL. One
     * allocation: the caller frees it with llmlimit_complete_result_clear(). */
    const char **warnings;
    int http_status;                 /* batch items: the status the single call would have had */
    char error[LLMLIMIT_ERROR_SIZE]; /* "" on success */
};

/* Frees result->warnings and zeroes the result. NULL is a no-op. */
LLMLIMIT_API void llmlimit_complete_result_clear(struct llmlimit_complete_result *result);

/* Reconciles a lease with what the call really used. Best effort: retries
 * unknown outcomes (transport errors, 5xx) with backoff, at most
 * finalize_attempts_max attempts within timeout_ms (0: default_timeout_ms).
 * It never frees anything locally: if it fails, the holds expire on the
 * server by themselves. Returns 0 (result filled; complete it with
 * llmlimit_complete_result_clear()), or LLMLIMIT_ERR_INVALID_ARGUMENT,
 * LLMLIMIT_ERR_NO_MEMORY, LLMLIMIT_ERR_TRANSPORT / LLMLIMIT_ERR_UNAVAILABLE
 * (the last attempt's failure, attempts exhausted),
 * LLMLIMIT_ERR_DEADLINE, LLMLIMIT_ERR_BAD_REQUEST
 * ("actual_key_not_in_lease:<key>", ...), LLMLIMIT_ERR_CONFLICT
 * (already_finalized: the lease was released), LLMLIMIT_ERR_UNAUTHORIZED,
 * LLMLIMIT_ERR_TOO_LARGE, LLMLIMIT_ERR_PROTOCOL. */
LLMLIMIT_API int llmlimit_complete(struct llmlimit_client *client,
                                   const struct llmlimit_complete_request *request,
                                   int64_t timeout_ms, struct llmlimit_complete_result *result,
                                   struct llmlimit_status *status);

/* Frees every hold of a lease whose call was never made. Best effort, with
 * the retries and errors of llmlimit_complete() (LLMLIMIT_ERR_CONFLICT is
 * already_finalized: the lease was completed). Releasing twice, or an
 * unknown lease, is success. */
LLMLIMIT_API int llmlimit_release(struct llmlimit_client *client, const char *lease_id,
                                  int64_t timeout_ms, struct llmlimit_status *status);

/* ---- batches ------------------------------------------------------------ */

/* Reserves count requests (1..LLMLIMIT_BATCH_ITEMS_MAX, at most
 * LLMLIMIT_BATCH_REQUIREMENTS_MAX requirements in all) in one HTTP request;
 * each is atomic on its own. results[i] answers requests[i] (the caller
 * provides count results). Requests without a lease_id get a generated one.
 * Unknown outcomes (the whole batch failing in transport or with a 5xx, or
 * single items answered 503) are retried with the same lease_ids until
 * definitive or until timeout_ms (0: default_timeout_ms). Returns 0 when
 * every item has an answer (check each result's http_status, allowed and
 * error); LLMLIMIT_ERR_DEADLINE when some items are still unknown then
 * (their http_status is 503 or 0); and the whole-request errors of
 * llmlimit_reserve(). */
LLMLIMIT_API int llmlimit_reserve_batch(struct llmlimit_client *client,
                                        const struct llmlimit_reserve_request *requests,
                                        size_t count, int64_t timeout_ms,
                                        struct llmlimit_reserve_result *results,
                                        struct llmlimit_status *status);

/* Completes count leases in one HTTP request, with the retry rules of
 * llmlimit_complete() for the whole request and for items answered 503.
 * results[i] answers requests[i]; the caller clears every result with
 * llmlimit_complete_result_clear(), whatever the return. Returns 0 when
 * every item has an answer (check each http_status), else the errors of
 * llmlimit_complete(). */
LLMLIMIT_API int llmlimit_complete_batch(struct llmlimit_client *client,
                                         const struct llmlimit_complete_request *requests,
                                         size_t count, int64_t timeout_ms,
                                         struct llmlimit_complete_result *results,
                                         struct llmlimit_status *status);

/* ---- usage ---------------------------------------------------------------- */

struct llmlimit_usage {
    char key[LLMLIMIT_KEY_LENGTH_MAX + 1];
    char kind[16];   /* "rolling", "concurrency", "budget" */
    char status[16]; /* "active", "decreasing" */
    uint64_t capacity;
    uint64_t reserved;            /* held by leases not yet completed */
    uint64_t used;                /* rolling: completed inside the window; budget: committed */
    uint64_t debt;                /* overage recorded this window/period */
    int64_t available;            /* budgets go negative after an overrun */
    int64_t period_start_unix_ms; /* budgets; else 0 */
    int64_t period_end_unix_ms;
};

/* The usage of one limit now (at_unix_ms = 0) or, for a budget, of the
 * period containing at_unix_ms. One attempt, no retries. Returns 0;
 * LLMLIMIT_ERR_NOT_FOUND for an unknown key; LLMLIMIT_ERR_INVALID_ARGUMENT,
 * LLMLIMIT_ERR_NO_MEMORY, LLMLIMIT_ERR_TRANSPORT, LLMLIMIT_ERR_UNAVAILABLE,
 * LLMLIMIT_ERR_UNAUTHORIZED, LLMLIMIT_ERR_BAD_REQUEST, LLMLIMIT_ERR_PROTOCOL. */
LLMLIMIT_API int llmlimit_usage(struct llmlimit_client *client, const char *key, int64_t at_unix_ms,
                                struct llmlimit_usage *out, struct llmlimit_status *status);

/* ---- admin (needs the admin token) -------------------------------------- */

/* A limit definition (docs/api.md "PUT /v1/admin/limits"). Strings NULL or ""
 * mean unset. */
struct llmlimit_limit_definition {
    const char *key;
    const char *kind; /* "rolling" | "concurrency" | "budget" */
    uint64_t capacity;
    uint32_t window_seconds;  /* rolling */
    uint32_t timeout_seconds; /* concurrency; budget (default 60, clamped 5..300) */
    const char *period;       /* budget: "day" | "week" | "month" | "none" (prepaid) */
    const char *unit;         /* "requests", "tokens", "usd_micros", ... */
    const char *description;
    const char *overage;        /* "debt" (default) | "deny" */
    uint32_t period_anchor_day; /* month budget: 1..28, the day months start on; 0: the 1st */
    const char *time_zone;      /* budget: an IANA zone ("Europe/Berlin"); NULL or "": UTC */
    /* docs/alerts.md, as JSON text: the "alerts" array ("[{\"at_percent\":80}]") and the
     * "webhook" value (a JSON string or object). NULL or "": none. */
    const char *alerts_json;
    const char *webhook_json;
};

struct llmlimit_limit_state {
    struct llmlimit_limit_definition definition; /* capacity is the one in force */
    const char *status;                          /* "active" | "decreasing" */
    uint64_t pending_decrease_to;                /* 0 when active */
};

/* Creates or changes a limit. *decreasing (NULL allowed) tells whether the
 * limit entered the decreasing state (a decrease that could not apply at
 * once). One attempt, no retries (the call is idempotent: repeat it).
 * Returns 0; LLMLIMIT_ERR_BAD_REQUEST (the status message names the field);
 * LLMLIMIT_ERR_INVALID_ARGUMENT, LLMLIMIT_ERR_NO_MEMORY,
 * LLMLIMIT_ERR_TRANSPORT, LLMLIMIT_ERR_UNAVAILABLE,
 * LLMLIMIT_ERR_UNAUTHORIZED, LLMLIMIT_ERR_PROTOCOL. */
LLMLIMIT_API int llmlimit_limit_put(struct llmlimit_client *client,
                                    const struct llmlimit_limit_definition *definition,
                                    bool *decreasing, struct llmlimit_status *status);

/* One limit. On 0, *out is a new state (its strings inside the same
 * allocation) the caller frees with llmlimit_limit_state_free(). Errors:
 * LLMLIMIT_ERR_NOT_FOUND and those of llmlimit_limit_put(). */
LLMLIMIT_API int llmlimit_limit_get(struct llmlimit_client *client, const char *key,
                                    struct llmlimit_limit_state **out,
                                    struct llmlimit_status *status);
LLMLIMIT_API void llmlimit_limit_state_free(struct llmlimit_limit_state *state);

struct llmlimit_limit_list {
    size_t count;
    struct llmlimit_limit_state *limits; /* sorted by key */
};

/* Every limit. On 0, *out is a new list (one allocation) the caller frees
 * with llmlimit_limit_list_free(). Errors: those of llmlimit_limit_put(). */
LLMLIMIT_API int llmlimit_limit_list(struct llmlimit_client *client,
                                     struct llmlimit_limit_list **out,
                                     struct llmlimit_status *status);
LLMLIMIT_API void llmlimit_limit_list_free(struct llmlimit_limit_list *list);

/* Deletes a limit: new reserves on it fail with unknown_limit_key, existing
 * leases still complete. Errors: LLMLIMIT_ERR_NOT_FOUND and those of
 * llmlimit_limit_put(). */
LLMLIMIT_API int llmlimit_limit_delete(struct llmlimit_client *client, const char *key,
                                       struct llmlimit_status *status);

/* ---- any other route ------------------------------------------------------ */

/* One HTTP request, no retries, for routes without a call of their own
 * (/v1/events, /metrics, /healthz, /v1/admin/keys). method is "GET",
 * "POST", "PUT", "PATCH" or "DELETE"; path starts with "/" and carries any
 * query string, already encoded; body is sent as application/json when not NULL. On any answer,
 * *response_body (NULL allowed) is a new NUL-terminated string the caller
 * frees with llmlimit_free(). Returns 0 on a 2xx answer; on another status
 * the error of that status (LLMLIMIT_ERR_NOT_FOUND, ...) with the body still
 * returned; LLMLIMIT_ERR_INVALID_ARGUMENT, LLMLIMIT_ERR_NO_MEMORY,
 * LLMLIMIT_ERR_TRANSPORT. */
LLMLIMIT_API int llmlimit_request(struct llmlimit_client *client, const char *method,
                                  const char *path, const char *body, int64_t timeout_ms,
                                  char **response_body, struct llmlimit_status *status);

/* Frees memory the library returned with "frees with llmlimit_free()". */
LLMLIMIT_API void llmlimit_free(void *pointer);

#ifdef __cplusplus
}
#endif

#endif
