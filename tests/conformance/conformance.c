/* The backend conformance suite: `conformance <backend>` runs every test
 * against that backend, each on a fresh instance and a namespace of its own.
 * memory and sqlite run on a manual clock and a fresh data directory under
 * $TMPDIR (removed at the end); tigerbeetle runs on the cluster's own clock
 * against a single-replica cluster started here from TIGERBEETLE_BIN (exit
 * 77, skipped, without it), and skips the tests that set absolute times. */
#include "conformance.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/memory/mem_bounds.h"
#include "backend/tigerbeetle/tigerbeetle.h"
#include "test.h"
#include "tigerbeetle/tb_server.h"

int test_failures_in_current;
int test_passed_count;
int test_failed_count;

const char *conformance_backend;
struct backend_traits conformance_traits;
bool conformance_period_clock;
static const void *backend_options; /* the backend's own options, or NULL */
static char root_dir[256];
static char run_tag[16]; /* tells this run's namespaces from another's on a shared cluster */
static unsigned fixture_count;

void fixture_config(struct fixture *f, struct backend_config *config, int64_t start_ms)
{
    memset(f, 0, sizeof *f);
    f->ops = backend_find(conformance_backend);
    f->real_clock = conformance_traits.real_clock && !conformance_period_clock;
    clock_manual_init(&f->clock, start_ms);
    snprintf(f->ns, sizeof f->ns, "%s-%u.", run_tag, fixture_count);
    snprintf(f->data_dir, sizeof f->data_dir, "%s/%u", root_dir, fixture_count++);
    backend_config_defaults(config);
    config->clock = f->real_clock ? clock_system() : &f->clock.clock;
    config->data_dir = f->data_dir;
    f->t0_ms = clock_now_ms(config->clock);
}

int fixture_try_open(struct fixture *f, const struct backend_config *config, struct backend **out,
                     char *error, size_t error_size)
{
    return backend_open(f->ops, config, backend_options, out, error, error_size);
}

bool fixture_start(struct fixture *f, const struct backend_config *config)
{
    if (mkdir(f->data_dir, 0700) != 0) {
        fprintf(stderr, "  mkdir %s: %s\n", f->data_dir, strerror(errno));
        return false;
    }
    char error[256] = "";
    if (fixture_try_open(f, config, &f->backend, error, sizeof error) != 0) {
        fprintf(stderr, "  open %s: %s\n", conformance_backend, error);
        f->backend = NULL;
        return false;
    }
    f->t0_ms = now_ms(f);
    return true;
}

bool fixture_open(struct fixture *f, int64_t start_ms)
{
    struct backend_config config;
    fixture_config(f, &config, start_ms);
    return fixture_start(f, &config);
}

void fixture_close(struct fixture *f)
{
    if (f->backend != NULL)
        backend_close(f->backend);
    f->backend = NULL;
}

/* ---- namespaces ---------------------------------------------------------- */

/* name inside the test's namespace. */
static const char *named(const struct fixture *f, const char *name, char out[NAMED_SIZE])
{
    int length = snprintf(out, NAMED_SIZE, "%s%s", f->ns, name);
    if (length < 0 || length > LIMIT_KEY_LENGTH_MAX) {
        fprintf(stderr, "conformance: name too long for a namespace: %s\n", name);
        abort();
    }
    return out;
}

/* Removes the namespace wherever it appears in text (errors, warnings). */
static void strip(const struct fixture *f, char *text)
{
    size_t ns_length = strlen(f->ns);
    char *at;
    while ((at = strstr(text, f->ns)) != NULL)
        memmove(at, at + ns_length, strlen(at + ns_length) + 1);
}

static void strip_state(const struct fixture *f, struct limit_state *state)
{
    strip(f, state->definition.key);
}

const char *fixture_name(const struct fixture *f, const char *name, char out[NAMED_SIZE])
{
    return named(f, name, out);
}

struct reservation fixture_reservation(const struct fixture *f,
                                       const struct reserve_request *request,
                                       const struct reserve_result *result)
{
    struct reservation r = reservation_of(request, result);
    strip(f, r.error);
    return r;
}

struct clock *fixture_clock(struct fixture *f)
{
    return f->real_clock ? clock_system() : &f->clock.clock;
}

/* ---- limits -------------------------------------------------------------- */

static struct limit_definition validated(struct limit_definition d)
{
    char error[256];
    if (limit_definition_validate(&d, error, sizeof error) != 0)
        fprintf(stderr, "  invalid test definition %s: %s\n", d.key, error);
    return d;
}

struct limit_definition rolling_limit(const char *key, uint64_t capacity, uint32_t window_seconds)
{
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "%s", key);
    d.kind = LIMIT_ROLLING;
    d.capacity = capacity;
    d.window_seconds = window_seconds;
    snprintf(d.unit, sizeof d.unit, "tokens");
    return validated(d);
}

struct limit_definition concurrency_limit(const char *key, uint64_t capacity,
                                          uint32_t timeout_seconds)
{
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "%s", key);
    d.kind = LIMIT_CONCURRENCY;
    d.capacity = capacity;
    d.timeout_seconds = timeout_seconds;
    snprintf(d.unit, sizeof d.unit, "requests");
    return validated(d);
}

struct limit_definition budget_limit(const char *key, uint64_t capacity, enum limit_period period,
                                     uint32_t timeout_seconds)
{
    struct limit_definition d = {0};
    snprintf(d.key, sizeof d.key, "%s", key);
    d.kind = LIMIT_BUDGET;
    d.capacity = capacity;
    d.period = period;
    d.timeout_seconds = timeout_seconds;
    snprintf(d.unit, sizeof d.unit, "usd_micros");
    return validated(d);
}

struct limit_definition budget_limit_in(const char *key, uint64_t capacity,
                                        enum limit_period period, uint8_t anchor_day,
                                        const char *time_zone)
{
    struct limit_definition d = budget_limit(key, capacity, period, 60);
    d.period_anchor_day = anchor_day;
    snprintf(d.time_zone, sizeof d.time_zone, "%s", time_zone);
    return validated(d);
}

enum backend_admin_result put(struct fixture *f, struct limit_definition definition,
                              struct limit_state *state, char *error)
{
    char key[NAMED_SIZE];
    named(f, definition.key, key);
    memcpy(definition.key, key, strlen(key) + 1); /* named() kept it within the bound */
    char buffer[RESULT_ERROR_SIZE] = "";
    struct limit_state ignored;
    struct limit_state *out = state != NULL ? state : &ignored;
    enum backend_admin_result rc =
        backend_put_limit(f->backend, &definition, out, buffer, sizeof buffer);
    if (rc == BACKEND_ADMIN_OK || rc == BACKEND_ADMIN_KIND_CHANGED ||
        rc == BACKEND_ADMIN_PERIOD_CHANGED)
        strip_state(f, out); /* taken, or the limit in force */
    strip(f, definition.key);
    if (rc != BACKEND_ADMIN_INVALID)
        admin_error_text(buffer, rc, definition.key, &definition, out);
    strip(f, buffer);
    if (error != NULL)
        snprintf(error, RESULT_ERROR_SIZE, "%s", buffer);
    return rc;
}

bool put_rolling(struct fixture *f, const char *key, uint64_t capacity, uint32_t window_seconds)
{
    return put(f, rolling_limit(key, capacity, window_seconds), NULL, NULL) == BACKEND_ADMIN_OK;
}

bool put_concurrency(struct fixture *f, const char *key, uint64_t capacity,
                     uint32_t timeout_seconds)
{
    return put(f, concurrency_limit(key, capacity, timeout_seconds), NULL, NULL) ==
           BACKEND_ADMIN_OK;
}

bool put_budget(struct fixture *f, const char *key, uint64_t capacity, enum limit_period period,
                uint32_t timeout_seconds)
{
    return put(f, budget_limit(key, capacity, period, timeout_seconds), NULL, NULL) ==
           BACKEND_ADMIN_OK;
}

enum backend_admin_result restore(struct fixture *f, struct limit_state state, char *error)
{
    char key[NAMED_SIZE];
    named(f, state.definition.key, key);
    memcpy(state.definition.key, key, strlen(key) + 1);
    char buffer[RESULT_ERROR_SIZE] = "";
    enum backend_admin_result rc = backend_restore_limit(f->backend, &state, buffer, sizeof buffer);
    if (rc != BACKEND_ADMIN_INVALID)
        admin_error_text(buffer, rc, key, NULL, NULL);
    strip(f, buffer);
    if (error != NULL)
        snprintf(error, RESULT_ERROR_SIZE, "%s", buffer);
    return rc;
}

enum backend_admin_result delete_limit(struct fixture *f, const char *key)
{
    char name[NAMED_SIZE];
    return backend_delete_limit(f->backend, named(f, key, name));
}

struct limit_state get_limit(struct fixture *f, const char *key, enum backend_admin_result *rc)
{
    char name[NAMED_SIZE];
    struct limit_state state = {0};
    *rc = backend_get_limit(f->backend, named(f, key, name), &state);
    if (*rc == BACKEND_ADMIN_OK)
        strip_state(f, &state);
    return state;
}

enum backend_admin_result list_limits(struct fixture *f, struct limit_state **out, size_t *count)
{
    enum backend_admin_result rc = backend_list_limits(f->backend, out, count);
    for (size_t i = 0; rc == BACKEND_ADMIN_OK && i < *count; i++)
        strip_state(f, &(*out)[i]);
    return rc;
}

/* ---- the data path ------------------------------------------------------- */

/* Requirements and their namespaced keys, for one request. */
struct named_items {
    char keys[REQUIREMENTS_PER_RESERVE_MAX][NAMED_SIZE];
    struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
    struct actual actuals[REQUIREMENTS_PER_RESERVE_MAX];
};

static void name_items(const struct fixture *f, const struct item *items, uint32_t count,
                       struct named_items *out)
{
    if (count > REQUIREMENTS_PER_RESERVE_MAX) {
        fprintf(stderr, "conformance: %u items in one request\n", count);
        abort();
    }
    for (uint32_t i = 0; i < count; i++) {
        const char *key = named(f, items[i].key, out->keys[i]);
        uint32_t length = (uint32_t)strlen(key);
        out->requirements[i] = (struct requirement){key, length, items[i].amount};
        out->actuals[i] = (struct actual){key, length, items[i].amount};
    }
}

struct reservation reserve_items(struct fixture *f, const char *lease_id, const struct item *items,
                                 uint32_t count)
{
    return reserve_items_as(f, lease_id, NULL, items, count);
}

bool caller_usage_of(struct fixture *f, const char *key, const char *caller,
                     struct caller_usage *out)
{
    if (f->backend->ops->usage_by_caller == NULL)
        return false;
    char name[NAMED_SIZE];
    struct caller_usage *rows = NULL;
    size_t count = 0;
    if (f->backend->ops->usage_by_caller(f->backend, named(f, key, name), now_ms(f), &rows,
                                         &count) != 0)
        return false;
    bool found = false;
    for (size_t i = 0; i < count; i++) {
        if (strcmp(rows[i].caller, caller) == 0) {
            *out = rows[i];
            found = true;
        }
    }
    free(rows);
    if (!found)
        memset(out, 0, sizeof *out);
    return true;
}

int caller_rank(struct fixture *f, const char *key, const char *caller)
{
    if (f->backend->ops->usage_by_caller == NULL)
        return -1;
    char name[NAMED_SIZE];
    struct caller_usage *rows = NULL;
    size_t count = 0;
    if (f->backend->ops->usage_by_caller(f->backend, named(f, key, name), now_ms(f), &rows,
                                         &count) != 0)
        return -1;
    int rank = -1;
    for (size_t i = 0; i < count && rank < 0; i++) {
        if (strcmp(rows[i].caller, caller) == 0)
            rank = (int)i;
    }
    free(rows);
    return rank;
}

static struct reserve_result reserve_raw(struct fixture *f, const char *lease_id,
                                         const char *caller, const struct named_items *named_items,
                                         uint32_t count, struct requirement_state *states,
                                         struct reservation *out)
{
    char lease[NAMED_SIZE];
    named(f, lease_id, lease);
    struct reserve_request request = {
        .lease_id = lease,
        .lease_id_length = (uint32_t)strlen(lease),
        .caller = caller,
        .caller_length = caller != NULL ? (uint32_t)strlen(caller) : 0,
        .requirements = named_items->requirements,
        .requirement_count = count,
        .states = states,
    };
    struct reserve_result result;
    memset(&result, 0xAB, sizeof result); /* every field must be written */
    backend_reserve_wait(f->backend, &request, &result, 1);
    *out = reservation_of(&request, &result);
    strip(f, out->error);
    return result;
}

struct reservation reserve_items_as(struct fixture *f, const char *lease_id, const char *caller,
                                    const struct item *items, uint32_t count)
{
    struct named_items n;
    name_items(f, items, count, &n);
    struct reservation r;
    reserve_raw(f, lease_id, caller, &n, count, NULL, &r);
    return r;
}

struct reserve_result reserve_with_states(struct fixture *f, const char *lease_id,
                                          const struct item *items, uint32_t count,
                                          struct requirement_state *states)
{
    struct named_items n;
    name_items(f, items, count, &n);
    struct reservation ignored;
    return reserve_raw(f, lease_id, NULL, &n, count, states, &ignored);
}

#define BATCH_MAX 16

void reserve_batch(struct fixture *f, const char *const *lease_ids, const struct item *items,
                   uint32_t count, struct reservation *out)
{
    if (count > BATCH_MAX)
        abort();
    char leases[BATCH_MAX][NAMED_SIZE];
    struct named_items n[BATCH_MAX];
    struct reserve_request requests[BATCH_MAX];
    struct reserve_result results[BATCH_MAX];
    memset(requests, 0, sizeof requests);
    for (uint32_t i = 0; i < count; i++) {
        name_items(f, &items[i], 1, &n[i]);
        named(f, lease_ids[i], leases[i]);
        requests[i] = (struct reserve_request){.lease_id = leases[i],
                                               .lease_id_length = (uint32_t)strlen(leases[i]),
                                               .requirements = n[i].requirements,
                                               .requirement_count = 1};
    }
    memset(results, 0xAB, sizeof results);
    backend_reserve_wait(f->backend, requests, results, count);
    for (uint32_t i = 0; i < count; i++) {
        out[i] = reservation_of(&requests[i], &results[i]);
        strip(f, out[i].error);
    }
}

bool reserve1(struct fixture *f, const char *lease_id, const char *key, uint64_t amount)
{
    struct reservation r = RESERVE(f, lease_id, {key, amount});
    return r.status == RESULT_OK && r.allowed;
}

struct completion complete_items(struct fixture *f, const char *lease_id, const struct item *items,
                                 uint32_t count)
{
    struct named_items n;
    name_items(f, items, count, &n);
    char lease[NAMED_SIZE];
    named(f, lease_id, lease);
    struct complete_request request = {
        .lease_id = lease,
        .lease_id_length = (uint32_t)strlen(lease),
        .actuals = n.actuals,
        .actual_count = count,
    };
    struct complete_result result;
    memset(&result, 0, sizeof result);
    backend_complete_wait(f->backend, &request, &result, 1);
    struct completion c = completion_of(&request, &result);
    strip(f, c.error);
    for (uint32_t i = 0; i < c.warning_count && i < WARNINGS_MAX; i++)
        strip(f, c.warnings[i]);
    return c;
}

struct completion complete_none(struct fixture *f, const char *lease_id)
{
    return complete_items(f, lease_id, NULL, 0);
}

struct release_outcome release(struct fixture *f, const char *lease_id)
{
    char lease[NAMED_SIZE];
    named(f, lease_id, lease);
    struct release_request request = {
        .lease_id = lease,
        .lease_id_length = (uint32_t)strlen(lease),
    };
    struct release_result result;
    memset(&result, 0xAB, sizeof result);
    backend_release_wait(f->backend, &request, &result, 1);
    struct release_outcome r = release_outcome_of(&result);
    strip(f, r.error);
    return r;
}

struct limit_usage usage_at(struct fixture *f, const char *key, int64_t at_unix_ms)
{
    char name[NAMED_SIZE];
    struct limit_usage u;
    memset(&u, 0, sizeof u);
    if (backend_usage(f->backend, named(f, key, name), at_unix_ms, &u) != 0)
        memset(&u, 0, sizeof u);
    strip_state(f, &u.state);
    return u;
}

struct limit_usage usage(struct fixture *f, const char *key)
{
    return usage_at(f, key, now_ms(f));
}

enum backend_admin_result usage_rc(struct fixture *f, const char *key)
{
    char name[NAMED_SIZE];
    struct limit_usage u;
    return backend_usage(f->backend, named(f, key, name), now_ms(f), &u);
}

/* done of usage_batch: may run on a backend thread. */
struct batch_wait {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
};

static void batch_done(void *context)
{
    struct batch_wait *w = context;
    pthread_mutex_lock(&w->mutex);
    CHECK(!w->done); /* once */
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
}

#define USAGE_BATCH_TEST_MAX 8

void usage_batch(struct fixture *f, const char *const *keys, uint32_t count,
                 struct usage_result *results)
{
    REQUIRE(count <= USAGE_BATCH_TEST_MAX);
    char names[USAGE_BATCH_TEST_MAX][NAMED_SIZE];
    struct usage_request requests[USAGE_BATCH_TEST_MAX];
    int64_t now = now_ms(f);
    for (uint32_t i = 0; i < count; i++)
        requests[i] = (struct usage_request){named(f, keys[i], names[i]), now};
    memset(results, 0xAB, count * sizeof *results);
    struct batch_wait w = {.done = false};
    pthread_mutex_init(&w.mutex, NULL);
    pthread_cond_init(&w.cond, NULL);
    backend_usage_batch(f->backend, requests, results, count, batch_done, &w);
    pthread_mutex_lock(&w.mutex);
    while (!w.done)
        pthread_cond_wait(&w.cond, &w.mutex);
    pthread_mutex_unlock(&w.mutex);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.mutex);
    for (uint32_t i = 0; i < count; i++)
        if (results[i].result == BACKEND_ADMIN_OK)
            strip_state(f, &results[i].usage.state);
}

/* ---- time ---------------------------------------------------------------- */

int64_t now_ms(struct fixture *f)
{
    return f->real_clock ? clock_now_ms(clock_system()) : clock_now_ms(&f->clock.clock);
}

static void sleep_until(struct fixture *f, int64_t at_ms)
{
    for (int64_t left = at_ms - now_ms(f); left > 0; left = at_ms - now_ms(f)) {
        struct timespec pause = {left / 1000, (long)(left % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
}

void advance(struct fixture *f, int64_t delta_ms)
{
    if (f->real_clock)
        sleep_until(f, now_ms(f) + delta_ms);
    else
        clock_manual_advance(&f->clock, delta_ms);
}

void advance_to(struct fixture *f, int64_t at_ms)
{
    if (f->real_clock)
        sleep_until(f, at_ms);
    else if (at_ms > now_ms(f))
        clock_manual_set(&f->clock, at_ms);
}

int64_t just_before(const struct fixture *f, int64_t at_ms)
{
    return at_ms - (f->real_clock ? REAL_EARLY_MARGIN_MS : 1);
}

int64_t just_after(const struct fixture *f, int64_t at_ms)
{
    return at_ms + (f->real_clock ? REAL_EXPIRY_LAG_MS : 0);
}

int64_t just_after_kept(const struct fixture *f, int64_t at_ms)
{
    return at_ms + (f->real_clock ? REAL_EXPIRY_LAG_MS + REAL_WHOLE_SECOND_MS : 0);
}

void set_time(struct fixture *f, int64_t unix_ms)
{
    if (f->real_clock) {
        fprintf(stderr, "conformance: set_time on a real clock (mark the test manual-clock)\n");
        abort();
    }
    clock_manual_set(&f->clock, unix_ms);
}

#define DAY_MS INT64_C(86400000)

int64_t utc_period_start_ms(enum limit_period period, int64_t at_ms)
{
    int64_t day_ms = at_ms - at_ms % DAY_MS; /* unix time has no leap seconds */
    if (period == PERIOD_DAY)
        return day_ms;
    if (period == PERIOD_WEEK) {
        int64_t days = day_ms / DAY_MS; /* 1970-01-01 was a Thursday: Monday is day 4 */
        return day_ms - ((days + 3) % 7) * DAY_MS;
    }
    time_t seconds = (time_t)(at_ms / 1000);
    struct tm tm;
    gmtime_r(&seconds, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    return (int64_t)timegm(&tm) * 1000;
}

int64_t utc_period_end_ms(enum limit_period period, int64_t at_ms)
{
    int64_t start_ms = utc_period_start_ms(period, at_ms);
    if (period == PERIOD_DAY)
        return start_ms + DAY_MS;
    if (period == PERIOD_WEEK)
        return start_ms + 7 * DAY_MS;
    return utc_period_start_ms(period, start_ms + 32 * DAY_MS);
}

bool tick(struct fixture *f)
{
    bool changed = false;
    if (backend_tick(f->backend, &changed) != 0)
        fprintf(stderr, "  tick failed\n");
    return changed;
}

struct backend_stats stats(struct fixture *f)
{
    struct backend_stats s;
    memset(&s, 0, sizeof s);
    backend_stats(f->backend, &s);
    return s;
}

/* ---- threads ------------------------------------------------------------- */

struct thread_start {
    pthread_barrier_t *barrier;
    void (*fn)(uint32_t, void *);
    void *context;
    uint32_t index;
};

static void *thread_main(void *argument)
{
    struct thread_start *start = argument;
    pthread_barrier_wait(start->barrier);
    start->fn(start->index, start->context);
    return NULL;
}

void run_threads(uint32_t count, void (*fn)(uint32_t index, void *context), void *context)
{
    pthread_t threads[128];
    struct thread_start starts[128];
    pthread_barrier_t barrier;
    if (count > 128)
        count = 128;
    pthread_barrier_init(&barrier, NULL, count);
    for (uint32_t i = 0; i < count; i++) {
        starts[i] = (struct thread_start){&barrier, fn, context, i};
        if (pthread_create(&threads[i], NULL, thread_main, &starts[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    }
    for (uint32_t i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
}

/* ---- the run ------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int skipped_count;
static const char *skipped_why; /* set by conformance_skip during a test */

void conformance_skip(const char *why)
{
    skipped_why = why;
}

/* Runs the tests whose name contains `only` (NULL: all). */
static void run_tests(const struct conformance_test *tests, uint32_t count, const char *only)
{
    for (uint32_t i = 0; i < count; i++) {
        const struct conformance_test *t = &tests[i];
        if (only != NULL && strstr(t->name, only) == NULL)
            continue;
        if (t->needs_manual_clock != NULL && conformance_traits.real_clock) {
            printf("skip %s: %s (cannot apply on the backend's own clock: %s)\n", t->name,
                   t->proves, t->needs_manual_clock);
            skipped_count++;
            continue;
        }
        int64_t started_ms = clock_monotonic_ms();
        test_failures_in_current = 0;
        skipped_why = NULL;
        conformance_period_clock = t->period_clock;
        t->run();
        conformance_period_clock = false;
        bool ok = test_failures_in_current == 0;
        if (ok && skipped_why != NULL) {
            printf("skip %s: %s (%s)\n", t->name, t->proves, skipped_why);
            skipped_count++;
            continue;
        }
        if (ok)
            test_passed_count++;
        else
            test_failed_count++;
        if (conformance_traits.real_clock)
            printf("%s %s (%.1f s): %s\n", ok ? "ok  " : "FAIL", t->name,
                   (double)(clock_monotonic_ms() - started_ms) / 1000.0, t->proves);
        else
            printf("%s %s: %s\n", ok ? "ok  " : "FAIL", t->name, t->proves);
        fflush(stdout);
    }
}

static void set_traits(const char *backend)
{
    bool tigerbeetle = strcmp(backend, "tigerbeetle") == 0;
    conformance_traits.bounded_lease_cache = strcmp(backend, "sqlite") != 0;
    conformance_traits.budget_periods_kept =
        strcmp(backend, "memory") == 0 ? MEM_BUDGET_PERIODS_KEPT : 0;
    conformance_traits.real_clock = tigerbeetle;
    conformance_traits.leases_outlive_cache = tigerbeetle;
    conformance_traits.counts_expired_holds = !tigerbeetle;
    conformance_traits.callers_max = strcmp(backend, "memory") == 0 ? MEM_CALLERS_MAX : 0;
}

static struct tb_test_server tb_server;
static struct tb_options tb_options;

/* A single-replica cluster for the whole run: 0, 77 (no binary), or 1. */
static int start_cluster(void)
{
    if (tb_test_server_binary() == NULL) {
        printf("SKIPPED: TIGERBEETLE_BIN not set\n");
        return 77;
    }
    if (tb_test_server_start(&tb_server) != 0) {
        tb_test_server_stop(&tb_server);
        return 1;
    }
    tb_options_defaults(&tb_options);
    tb_options.addresses = tb_server.address;
    tb_options.sessions = 1;
    backend_options = &tb_options;
    printf("tigerbeetle: a single replica on %s\n", tb_server.address);
    return 0;
}

static int usage_error(void)
{
    fprintf(stderr,
            "usage: conformance BACKEND [--real-clock] [--only TEXT]\n"
            "  BACKEND is one of: %s (tigerbeetle starts a cluster from TIGERBEETLE_BIN)\n"
            "  --real-clock  run on the wall clock, waiting, as against tigerbeetle\n"
            "  --only TEXT   only the tests whose name contains TEXT\n",
            backend_names());
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || backend_find(argv[1]) == NULL)
        return usage_error();
    conformance_backend = argv[1];
    set_traits(argv[1]);
    const char *only = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--real-clock") == 0)
            conformance_traits.real_clock = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else
            return usage_error();
    }
    snprintf(run_tag, sizeof run_tag, "c%x", (unsigned)(time(NULL) ^ ((unsigned)getpid() << 16)));
    bool tigerbeetle = strcmp(conformance_backend, "tigerbeetle") == 0;
    if (tigerbeetle) {
        int rc = start_cluster();
        if (rc != 0)
            return rc;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(root_dir, sizeof root_dir, "%s/llmlimit-conformance-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(root_dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", root_dir, strerror(errno));
        if (tigerbeetle)
            tb_test_server_stop(&tb_server);
        return 2;
    }
    printf("conformance of the %s backend%s\n", conformance_backend,
           conformance_traits.real_clock ? ", on its own clock" : "");
    run_tests(reserve_tests, reserve_test_count, only);
    run_tests(budget_tests, budget_test_count, only);
    run_tests(period_tests, period_test_count, only);
    run_tests(lease_tests, lease_test_count, only);
    run_tests(admin_tests, admin_test_count, only);
    run_tests(retry_tests, retry_test_count, only);
    run_tests(stress_tests, stress_test_count, only);
    run_tests(console_tests, console_test_count, only);
    run_tests(wait_tests, wait_test_count, only);
    run_tests(wait_stress_tests, wait_stress_test_count, only);
    nftw(root_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (tigerbeetle)
        tb_test_server_stop(&tb_server);
    if (skipped_count > 0)
        printf("%d skipped: they need the suite's manual clock, or an operation the backend "
               "does not have\n",
               skipped_count);
    return test_summary();
}
