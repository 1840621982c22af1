/* libFuzzer harness: the registry file loader (DATA_DIR/limits.json,
 * docs/configuration.md "The registry file") restoring into the memory
 * backend. Any input either loads or is refused with "<file>: line L..."
 * (never a crash, never a silent empty registry); a registry that loads is
 * written back and must load again into a fresh backend as the very same
 * states. */
#include <assert.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/memory/memory.h"
#include "server/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ERROR_SIZE 1024

static char dir[256];
static char file[300];

static void cleanup(void)
{
    char tmp[320];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    unlink(tmp);
    unlink(file);
    rmdir(dir);
}

static void setup_once(void)
{
    if (dir[0] != '\0')
        return;
    /* the loader's rewrite fsyncs: point TMPDIR at a tmpfs for speed */
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = P_tmpdir;
    snprintf(dir, sizeof dir, "%s/llmlimit-fuzz-registry-XXXXXX", base);
    char *made = mkdtemp(dir);
    assert(made != NULL);
    snprintf(file, sizeof file, "%s/limits.json", dir);
    atexit(cleanup);
}

static struct backend *backend_new(void)
{
    struct backend_config config;
    memset(&config, 0, sizeof config);
    config.clock = clock_system();
    config.data_dir = dir;
    config.lease_cache_entries = 16;
    config.lease_retention_ms = 1000;
    config.concurrency_poll_ms = CONCURRENCY_POLL_MS_DEFAULT;
    config.decrease_retry_ms = DECREASE_RETRY_MS_DEFAULT;
    struct backend *backend = NULL;
    char error[ERROR_SIZE];
    int opened = backend_open(&mem_backend_ops, &config, NULL, &backend, error, sizeof error);
    assert(opened == 0);
    return backend;
}

static void write_input(const uint8_t *data, size_t size)
{
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        assert(n > 0);
        done += (size_t)n;
    }
    close(fd);
}

static bool same_states(const struct limit_state *a, const struct limit_state *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct limit_definition *x = &a[i].definition, *y = &b[i].definition;
        if (strcmp(x->key, y->key) != 0 || x->kind != y->kind || x->capacity != y->capacity ||
            x->window_seconds != y->window_seconds || x->timeout_seconds != y->timeout_seconds ||
            x->period != y->period || x->period_anchor_day != y->period_anchor_day ||
            strcmp(x->time_zone, y->time_zone) != 0 || x->zone != y->zone ||
            strcmp(x->unit, y->unit) != 0 || strcmp(x->description, y->description) != 0 ||
            x->overage != y->overage || a[i].status != b[i].status ||
            a[i].pending_decrease_to != b[i].pending_decrease_to)
            return false;
    }
    return true;
}

/* Loads the file into a fresh backend; returns its states (caller frees) or
 * NULL if the loader refused it. */
static struct limit_state *load(size_t *count, char *error)
{
    struct backend *backend = backend_new();
    struct registry *registry = NULL;
    struct limit_state *states = NULL;
    if (registry_open(dir, backend, &registry, error, ERROR_SIZE) == 0) {
        enum backend_admin_result listed = backend_list_limits(backend, &states, count);
        assert(listed == BACKEND_ADMIN_OK);
        if (*count > 0)
            assert(registry_save(registry) == REGISTRY_OK);
        registry_close(registry);
    } else {
        assert(registry == NULL);
        assert(strncmp(error, file, strlen(file)) == 0); /* names the file */
    }
    backend_close(backend);
    return states;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup_once();
    write_input(data, size);
    char error[ERROR_SIZE] = "";
    size_t count = 0;
    struct limit_state *states = load(&count, error);
    if (states == NULL || count == 0) {
        free(states);
        return 0;
    }
    /* load() rewrote the file from the backend: it must load back the same */
    size_t count_again = 0;
    struct limit_state *again = load(&count_again, error);
    assert(again != NULL);
    assert(count_again == count);
    assert(same_states(states, again, count));
    free(states);
    free(again);
    return 0;
}
