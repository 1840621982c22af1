/* Backend table and the blocking wrappers over the asynchronous data path. */
#include "backend.h"

#include <pthread.h>
#include <string.h>

extern const struct backend_ops memory_backend_ops;
extern const struct backend_ops sqlite_backend_ops;
extern const struct backend_ops tigerbeetle_backend_ops;

/* Each backend adds itself here once it builds. */
static const struct backend_ops *const backends[] = {
    &memory_backend_ops,
    &sqlite_backend_ops,
    &tigerbeetle_backend_ops,
};

#define BACKEND_COUNT (sizeof backends / sizeof backends[0])

void backend_config_defaults(struct backend_config *config)
{
    memset(config, 0, sizeof *config);
    config->clock = clock_system();
    config->data_dir = "./data";
    config->lease_cache_entries = LEASE_CACHE_ENTRIES_DEFAULT;
    config->lease_retention_ms = LEASE_RETENTION_MS_DEFAULT;
    config->concurrency_poll_ms = CONCURRENCY_POLL_MS_DEFAULT;
    config->decrease_retry_ms = DECREASE_RETRY_MS_DEFAULT;
    config->tb_cluster = "0";
    config->tb_addresses = "127.0.0.1:3000";
    config->tb_sessions = 4;
}

const struct backend_ops *backend_find(const char *name)
{
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i];
    }
    return NULL;
}

const char *backend_names(void)
{
    static char names[128];
    if (names[0] != '\0')
        return names;
    char buffer[sizeof names] = "";
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (i > 0)
            strncat(buffer, ",", sizeof buffer - strlen(buffer) - 1);
        strncat(buffer, backends[i]->name, sizeof buffer - strlen(buffer) - 1);
    }
    memcpy(names, buffer, sizeof names); /* same bytes from any thread */
    return names;
}

struct waiter {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
};

static void waiter_done(void *context)
{
    struct waiter *w = context;
    pthread_mutex_lock(&w->mutex);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
}

static void waiter_init(struct waiter *w)
{
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = false;
}

static void waiter_wait(struct waiter *w)
{
    pthread_mutex_lock(&w->mutex);
    while (!w->done)
        pthread_cond_wait(&w->cond, &w->mutex);
    pthread_mutex_unlock(&w->mutex);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mutex);
}

void backend_reserve_wait(const struct backend_ops *ops, struct backend *backend,
                          const struct reserve_request *requests, struct reserve_result *results,
                          uint32_t count)
{
    struct waiter w;
    waiter_init(&w);
    ops->reserve(backend, requests, results, count, waiter_done, &w);
    waiter_wait(&w);
}

void backend_complete_wait(const struct backend_ops *ops, struct backend *backend,
                           const struct complete_request *requests, struct complete_result *results,
                           uint32_t count)
{
    struct waiter w;
    waiter_init(&w);
    ops->complete(backend, requests, results, count, waiter_done, &w);
    waiter_wait(&w);
}

void backend_release_wait(const struct backend_ops *ops, struct backend *backend,
                          const struct release_request *requests, struct release_result *results,
                          uint32_t count)
{
    struct waiter w;
    waiter_init(&w);
    ops->release(backend, requests, results, count, waiter_done, &w);
    waiter_wait(&w);
}
