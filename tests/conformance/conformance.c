/* The backend conformance suite: `conformance <backend>` runs every test
 * against that backend, each on a fresh instance, a manual clock and a
 * fresh data directory under $TMPDIR (removed at the end). */
#include "conformance.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

const char *conformance_backend;
struct backend_traits conformance_traits;
static char root_dir[256];
static unsigned fixture_count;

void fixture_config(struct fixture *f, struct backend_config *config, int64_t start_ms)
{
    memset(f, 0, sizeof *f);
    f->ops = backend_find(conformance_backend);
    clock_manual_init(&f->clock, start_ms);
    snprintf(f->data_dir, sizeof f->data_dir, "%s/%u", root_dir, fixture_count++);
    backend_config_defaults(config);
    config->clock = &f->clock.clock;
    config->data_dir = f->data_dir;
}

bool fixture_start(struct fixture *f, const struct backend_config *config)
{
    if (mkdir(f->data_dir, 0700) != 0) {
        fprintf(stderr, "  mkdir %s: %s\n", f->data_dir, strerror(errno));
        return false;
    }
    char error[256] = "";
    if (backend_open(f->ops, config, NULL, &f->backend, error, sizeof error) != 0) {
        fprintf(stderr, "  open %s: %s\n", conformance_backend, error);
        f->backend = NULL;
        return false;
    }
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

int put(struct fixture *f, struct limit_definition definition, struct limit_state *state,
        char *error)
{
    char buffer[RESULT_ERROR_SIZE] = "";
    struct limit_state ignored;
    int rc = backend_put_limit(f->backend, &definition, state != NULL ? state : &ignored, buffer,
                               sizeof buffer);
    if (error != NULL)
        snprintf(error, RESULT_ERROR_SIZE, "%s", buffer);
    return rc;
}

bool put_rolling(struct fixture *f, const char *key, uint64_t capacity, uint32_t window_seconds)
{
    return put(f, rolling_limit(key, capacity, window_seconds), NULL, NULL) == 0;
}

bool put_concurrency(struct fixture *f, const char *key, uint64_t capacity,
                     uint32_t timeout_seconds)
{
    return put(f, concurrency_limit(key, capacity, timeout_seconds), NULL, NULL) == 0;
}

bool put_budget(struct fixture *f, const char *key, uint64_t capacity, enum limit_period period,
                uint32_t timeout_seconds)
{
    return put(f, budget_limit(key, capacity, period, timeout_seconds), NULL, NULL) == 0;
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
    struct caller_usage *rows = NULL;
    size_t count = 0;
    if (f->backend->ops->usage_by_caller(f->backend, key, now_ms(f), &rows, &count) != 0)
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

struct reservation reserve_items_as(struct fixture *f, const char *lease_id, const char *caller,
                                    const struct item *items, uint32_t count)
{
    struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < count; i++) {
        requirements[i].key = items[i].key;
        requirements[i].key_length = (uint32_t)strlen(items[i].key);
        requirements[i].amount = items[i].amount;
    }
    struct reserve_request request = {
        .lease_id = lease_id,
        .lease_id_length = (uint32_t)strlen(lease_id),
        .caller = caller,
        .caller_length = caller != NULL ? (uint32_t)strlen(caller) : 0,
        .requirements = requirements,
        .requirement_count = count,
    };
    struct reserve_result result;
    memset(&result, 0xAB, sizeof result); /* every field must be written */
    backend_reserve_wait(f->backend, &request, &result, 1);
    return reservation_of(&request, &result);
}

bool reserve1(struct fixture *f, const char *lease_id, const char *key, uint64_t amount)
{
    struct reservation r = RESERVE(f, lease_id, {key, amount});
    return r.status == RESULT_OK && r.allowed;
}

struct completion complete_items(struct fixture *f, const char *lease_id, const struct item *items,
                                 uint32_t count)
{
    struct actual actuals[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < count; i++) {
        actuals[i].key = items[i].key;
        actuals[i].key_length = (uint32_t)strlen(items[i].key);
        actuals[i].actual_amount = items[i].amount;
    }
    struct complete_request request = {
        .lease_id = lease_id,
        .lease_id_length = (uint32_t)strlen(lease_id),
        .actuals = actuals,
        .actual_count = count,
    };
    struct complete_result result;
    memset(&result, 0, sizeof result);
    backend_complete_wait(f->backend, &request, &result, 1);
    return completion_of(&request, &result);
}

struct completion complete_none(struct fixture *f, const char *lease_id)
{
    return complete_items(f, lease_id, NULL, 0);
}

struct release_outcome release(struct fixture *f, const char *lease_id)
{
    struct release_request request = {
        .lease_id = lease_id,
        .lease_id_length = (uint32_t)strlen(lease_id),
    };
    struct release_result result;
    memset(&result, 0xAB, sizeof result);
    backend_release_wait(f->backend, &request, &result, 1);
    return release_outcome_of(&result);
}

struct limit_usage usage_at(struct fixture *f, const char *key, int64_t at_unix_ms)
{
    struct limit_usage u;
    memset(&u, 0, sizeof u);
    if (backend_usage(f->backend, key, at_unix_ms, &u) != 0)
        memset(&u, 0, sizeof u);
    return u;
}

struct limit_usage usage(struct fixture *f, const char *key)
{
    return usage_at(f, key, now_ms(f));
}

int usage_rc(struct fixture *f, const char *key)
{
    struct limit_usage u;
    return backend_usage(f->backend, key, now_ms(f), &u);
}

int64_t now_ms(struct fixture *f)
{
    return clock_now_ms(&f->clock.clock);
}

void advance(struct fixture *f, int64_t delta_ms)
{
    clock_manual_advance(&f->clock, delta_ms);
}

void set_time(struct fixture *f, int64_t unix_ms)
{
    clock_manual_set(&f->clock, unix_ms);
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

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    if (argc != 2 || backend_find(argv[1]) == NULL) {
        fprintf(stderr, "usage: conformance BACKEND (one of: %s)\n", backend_names());
        return 2;
    }
    conformance_backend = argv[1];
    conformance_traits.bounded_lease_cache = strcmp(argv[1], "sqlite") != 0;
    conformance_traits.budget_periods_kept =
        strcmp(argv[1], "memory") == 0 ? BUDGET_PERIODS_KEPT : 0;
    conformance_traits.callers_max = strcmp(argv[1], "memory") == 0 ? MEMORY_CALLERS_MAX : 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(root_dir, sizeof root_dir, "%s/llmlimit-conformance-XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    if (mkdtemp(root_dir) == NULL) {
        fprintf(stderr, "mkdtemp %s: %s\n", root_dir, strerror(errno));
        return 2;
    }
    printf("conformance of the %s backend\n", conformance_backend);
    int passed = 0, failed = 0;
    run_reserve_tests(&passed, &failed);
    run_budget_tests(&passed, &failed);
    run_lease_tests(&passed, &failed);
    run_admin_tests(&passed, &failed);
    run_retry_tests(&passed, &failed);
    run_stress_tests(&passed, &failed);
    run_console_tests(&passed, &failed);
    nftw(root_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    /* The counts of every file's tests, summed here, end the run. */
    (void)test_failures_in_current;
    test_passed_count = passed;
    test_failed_count = failed;
    return test_summary();
}
