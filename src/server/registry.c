/* limits.json: load and validate at startup, atomic rewrite (write
 * limits.json.tmp, fsync, rename, fsync the directory) under one mutex, so
 * the file always holds a whole registry, never a torn one. A change that
 * cannot be written is undone in the backend; a change cut short by a crash
 * is settled at the next start in favour of the file (docs/configuration.md
 * "The registry file"). */
#include "registry.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buffer.h"
#include "util/file.h"
#include "server_bounds.h"
#include "wire/decode.h"
#include "wire/encode.h"
#include "util/jdoc.h"
#include "util/log.h"

struct registry {
    struct backend *backend;
    pthread_mutex_t mutex; /* one writer of the file at a time */
    size_t count;          /* limits at the last write or load, or unsaved creation */
    bool dirty;            /* the file may differ from the backend: rewrite at the next tick */
    _Atomic uint64_t generation; /* files written (and loaded): registry_generation */
    char dir[PATH_MAX];
    char path[PATH_MAX];
    char tmp_path[PATH_MAX];
};

uint64_t registry_generation(struct registry *registry)
{
    return atomic_load(&registry->generation);
}

const char *registry_path(const struct registry *registry)
{
    return registry->path;
}

/* Decodes entry i into *state; error "<file>: line L: <reason>". */
static int decode_entry(struct registry *r, const struct jdoc_value *item, size_t i,
                        struct limit_state *state, char *error, size_t error_size)
{
    char path[32], reason[DECODE_ERROR_SIZE];
    snprintf(path, sizeof path, "[%zu]", i);
    if (decode_limit_state(item, path, state, reason, sizeof reason) == 0)
        return 0;
    snprintf(error, error_size, "%s: line %u: %s", r->path, item->line, reason);
    return -1;
}

static int restore_entry(struct registry *r, const struct jdoc_value *item, size_t i, char *error,
                         size_t error_size)
{
    struct limit_state state;
    if (decode_entry(r, item, i, &state, error, error_size) != 0)
        return -1;
    char reason[DECODE_ERROR_SIZE];
    enum backend_admin_result restored =
        backend_restore_limit(r->backend, &state, reason, sizeof reason);
    if (restored == BACKEND_ADMIN_OK)
        return 0;
    if (restored != BACKEND_ADMIN_INVALID)
        encode_admin_error(reason, sizeof reason, restored, state.definition.key, NULL, NULL);
    snprintf(error, error_size, "%s: line %u: [%zu]: %.400s", r->path, item->line, i, reason);
    return -1;
}

struct key_entry {
    const char *key;
    size_t index;
};

static int key_entry_compare(const void *a, const void *b)
{
    const struct key_entry *x = a, *y = b;
    int order = strcmp(x->key, y->key);
    if (order != 0)
        return order;
    return x->index < y->index ? -1 : (x->index > y->index ? 1 : 0);
}

/* The file's keys, sorted, into *sorted; a key twice in the file is an
 * error at its second entry. Checked on the file itself: a durable backend
 * may already hold every key. Called after every entry decoded, so each has
 * a definition with a key. */
static int sorted_keys(struct registry *r, const struct jdoc_value *root, struct arena *arena,
                       struct key_entry **sorted, char *error, size_t error_size)
{
    size_t count = root->count;
    struct key_entry *entries = arena_alloc(arena, (count > 0 ? count : 1) * sizeof *entries);
    if (entries == NULL) {
        snprintf(error, error_size, "%s: out of memory", r->path);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const struct jdoc_value *key = jdoc_get(jdoc_get(&root->as.items[i], "definition"), "key");
        assert(jdoc_is(key, JDOC_STRING));
        entries[i].key = key->as.string;
        entries[i].index = i;
    }
    qsort(entries, count, sizeof *entries, key_entry_compare);
    *sorted = entries;
    size_t second = SIZE_MAX; /* the earliest second occurrence, for a stable message */
    for (size_t i = 1; i < count; i++) {
        if (strcmp(entries[i].key, entries[i - 1].key) == 0 && entries[i].index < second)
            second = entries[i].index;
    }
    if (second == SIZE_MAX)
        return 0;
    snprintf(error, error_size, "%s: line %u: [%zu].definition.key: duplicate key", r->path,
             root->as.items[second].line, second);
    return -1;
}

static int key_only_compare(const void *a, const void *b)
{
    const struct key_entry *x = a, *y = b;
    return strcmp(x->key, y->key);
}

/* The file wins: a limit the backend kept that the file does not name came
 * from a put cut short by a crash (its file was never written) or a delete
 * whose file was written but whose backend call never ran. */
static int reconcile(struct registry *r, const struct key_entry *sorted, size_t count, char *error,
                     size_t error_size)
{
    struct limit_name *names = NULL;
    size_t live = 0;
    if (backend_list_names(r->backend, &names, &live) != 0) {
        snprintf(error, error_size, "%s: cannot list the backend's limits", r->path);
        return -1;
    }
    int result = 0;
    for (size_t i = 0; i < live && result == 0; i++) {
        struct key_entry probe = {.key = names[i].key};
        if (bsearch(&probe, sorted, count, sizeof *sorted, key_only_compare) != NULL)
            continue;
        log_write(LOG_WARN, "limit not in the registry file: deleted from the backend", "key",
                  probe.key, "file", r->path, NULL);
        if (backend_delete_limit(r->backend, probe.key) == BACKEND_ADMIN_UNAVAILABLE) {
            snprintf(error, error_size,
                     "%s: cannot delete limit %.300s, which the file does not name", r->path,
                     probe.key);
            result = -1;
        }
    }
    limit_names_free(names, live);
    return result;
}

/* Every entry is decoded and checked before any reaches the backend. */
static int registry_restore(struct registry *r, const struct jdoc_value *root, struct arena *arena,
                            char *error, size_t error_size)
{
    if (!jdoc_is(root, JDOC_ARRAY) || root->count > LIMITS_COUNT_MAX) {
        snprintf(error, error_size, "%s: line 1: must be a JSON array of at most %d limit states",
                 r->path, LIMITS_COUNT_MAX);
        return -1;
    }
    struct limit_state state;
    for (size_t i = 0; i < root->count; i++) {
        if (decode_entry(r, &root->as.items[i], i, &state, error, error_size) != 0)
            return -1;
    }
    struct key_entry *sorted = NULL;
    if (sorted_keys(r, root, arena, &sorted, error, error_size) != 0)
        return -1;
    for (size_t i = 0; i < root->count; i++) {
        if (restore_entry(r, &root->as.items[i], i, error, error_size) != 0)
            return -1;
    }
    if (reconcile(r, sorted, root->count, error, error_size) != 0)
        return -1;
    assert(root->count <= LIMITS_COUNT_MAX);
    r->count = root->count;
    return 0;
}

static int registry_write(struct registry *r, const char *skip_key);

/* No file: a fresh data directory, or a file removed by hand. Whatever the
 * backend holds (a durable one may hold limits) is written into a new file,
 * so that from now on the file exists and every change is settled by it. */
static int registry_create(struct registry *r, char *error, size_t error_size)
{
    struct limit_state *states = NULL;
    size_t live = 0;
    if (backend_list_limits(r->backend, &states, &live) != 0) {
        snprintf(error, error_size, "%s: cannot list the backend's limits", r->path);
        return -1;
    }
    free(states);
    if (live > 0) {
        char count[24];
        snprintf(count, sizeof count, "%zu", live);
        log_write(LOG_WARN, "no registry file: written from the limits the backend holds", "file",
                  r->path, "limits", count, NULL);
    }
    if (registry_write(r, NULL) != 0) {
        snprintf(error, error_size, "%s: cannot be written (see the log)", r->path);
        return -1;
    }
    return 0;
}

/* A limits.json.tmp left by a rewrite that a crash cut short is never read:
 * limits.json is still the whole previous registry. */
static void remove_stale_tmp(struct registry *r)
{
    if (unlink(r->tmp_path) == 0)
        log_write(LOG_WARN, "removed a stale registry file (a rewrite was cut short)", "file",
                  r->tmp_path, NULL);
    else if (errno != ENOENT)
        log_write(LOG_WARN, "cannot remove a stale registry file", "file", r->tmp_path, "reason",
                  strerror(errno), NULL);
}

static int registry_load(struct registry *r, char *error, size_t error_size)
{
    remove_stale_tmp(r);
    char *text = NULL;
    size_t length = 0;
    int found = file_read_all(r->path, REGISTRY_BYTES_MAX, &text, &length, error, error_size);
    if (found != 0)
        return found > 0 ? registry_create(r, error, error_size) : -1;
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root;
    char reason[DECODE_ERROR_SIZE];
    int result = jdoc_parse(text, length, &arena, &root, reason, sizeof reason);
    if (result != 0)
        snprintf(error, error_size, "%s: %s", r->path, reason);
    else
        result = registry_restore(r, root, &arena, error, error_size);
    arena_free(&arena);
    free(text);
    return result;
}

int registry_open(const char *data_dir, struct backend *backend, struct registry **out, char *error,
                  size_t error_size)
{
    assert(data_dir != NULL);
    assert(backend != NULL);
    *out = NULL;
    struct registry *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    r->backend = backend;
    int n1 = snprintf(r->dir, sizeof r->dir, "%s", data_dir);
    int n2 = snprintf(r->path, sizeof r->path, "%s/limits.json", data_dir);
    int n3 = snprintf(r->tmp_path, sizeof r->tmp_path, "%s/limits.json.tmp", data_dir);
    if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n3 >= sizeof r->tmp_path) {
        snprintf(error, error_size, "%s: path too long", data_dir);
        free(r);
        return -1;
    }
    pthread_mutex_init(&r->mutex, NULL);
    if (registry_load(r, error, error_size) != 0) {
        registry_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

void registry_close(struct registry *registry)
{
    if (registry == NULL)
        return;
    pthread_mutex_destroy(&registry->mutex);
    free(registry);
}

/* One state per line: a diff of two registries is a diff of lines.
 * skip_key (or NULL) is left out: the file of a delete, written first.
 * *count_out: the states written. */
static int registry_encode(struct registry *r, const char *skip_key, struct buffer *b,
                           size_t *count_out)
{
    struct limit_state *states = NULL;
    size_t count = 0;
    if (backend_list_limits(r->backend, &states, &count) != 0)
        return -1;
    assert(states != NULL || count == 0);
    buffer_append_str(b, "[\n");
    size_t written = 0;
    for (size_t i = 0; i < count; i++) {
        if (skip_key != NULL && strcmp(states[i].definition.key, skip_key) == 0)
            continue;
        if (written > 0)
            buffer_append_str(b, ",\n");
        encode_limit_state(b, &states[i]);
        written++;
    }
    buffer_append_str(b, written > 0 ? "\n]\n" : "]\n");
    free(states);
    assert(written <= count);
    *count_out = written;
    return b->failed ? -1 : 0;
}

/* tmp file, fsync, rename over limits.json, fsync the directory so the
 * rename itself is durable. Called with the mutex held. A failure is logged
 * unless the file is already known to be behind (dirty), so a full disk
 * logs once, not every tick; the first success after that is logged too. */
static int registry_write(struct registry *r, const char *skip_key)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    b.capacity_max = REGISTRY_BYTES_MAX;
    int saved_errno = 0;
    const char *step = NULL;
    size_t count = 0;
    if (registry_encode(r, skip_key, &b, &count) != 0) {
        step = "encode";
        saved_errno = ENOMEM;
    }
    if (step == NULL)
        step = file_replace(r->path, r->tmp_path, r->dir, b.data, b.length, &saved_errno);
    buffer_free(&b);
    if (step == NULL) {
        if (r->dirty)
            log_write(LOG_INFO, "registry written again after failed writes", "file", r->path,
                      NULL);
        r->dirty = false;
        r->count = count;
        atomic_fetch_add(&r->generation, 1);
        return 0;
    }
    if (!r->dirty)
        log_write(LOG_ERROR, "registry write failed", "file", r->path, "step", step, "reason",
                  strerror(saved_errno), NULL);
    return -1;
}

/* After a put whose file could not be written: the backend goes back to
 * the state before (none: the key is deleted again). An increase undone
 * while more is held than the old capacity waits as a decrease, like any.
 * Returns 0, or -1 if the backend refused the undo. */
static int undo_put(struct registry *r, const char *key, const struct limit_state *before)
{
    if (before == NULL)
        return backend_delete_limit(r->backend, key) == 0 ? 0 : -1;
    struct limit_state state;
    char error[DECODE_ERROR_SIZE];
    if (backend_put_limit(r->backend, &before->definition, &state, error, sizeof error) != 0)
        return -1;
    if (before->status != LIMIT_DECREASING)
        return 0;
    struct limit_definition pending = before->definition;
    pending.capacity = before->pending_decrease_to;
    return backend_put_limit(r->backend, &pending, &state, error, sizeof error) == 0 ? 0 : -1;
}

static enum registry_outcome put_unsaved(struct registry *r, const char *key,
                                         const struct limit_state *before)
{
    /* Whatever the undo gives, the ticker brings the file in line. */
    r->dirty = true;
    if (undo_put(r, key, before) == 0) {
        log_write(LOG_ERROR, "limit change undone: the registry file could not be written", "key",
                  key, NULL);
        return REGISTRY_WRITE_FAILED;
    }
    log_write(LOG_ERROR,
              "limit change in force but not saved: the registry file could not be written and "
              "the backend could not undo the change",
              "key", key, NULL);
    return REGISTRY_UNSAVED;
}

enum registry_outcome registry_put(struct registry *registry,
                                   const struct limit_definition *definition,
                                   struct limit_state *state_out, char *error, size_t error_size)
{
    pthread_mutex_lock(&registry->mutex);
    struct limit_state before;
    enum registry_outcome outcome = REGISTRY_OK;
    bool exists = backend_get_limit(registry->backend, definition->key, &before) == 0;
    enum backend_admin_result put = BACKEND_ADMIN_TOO_MANY_LIMITS;
    if (exists || registry->count < LIMITS_COUNT_MAX)
        put = backend_put_limit(registry->backend, definition, state_out, error, error_size);
    if (put == BACKEND_ADMIN_UNAVAILABLE) {
        outcome = REGISTRY_BACKEND_FAILED;
    } else if (put != BACKEND_ADMIN_OK) {
        outcome = REGISTRY_REJECTED;
        if (put != BACKEND_ADMIN_INVALID) /* else the validator's text is there */
            encode_admin_error(error, error_size, put, definition->key, definition, state_out);
    } else if (registry_write(registry, NULL) != 0) {
        outcome = put_unsaved(registry, definition->key, exists ? &before : NULL);
    }
    /* The backend took the definition: the state it reports is that key's. */
    assert(outcome == REGISTRY_REJECTED || outcome == REGISTRY_BACKEND_FAILED ||
           strcmp(state_out->definition.key, definition->key) == 0);
    pthread_mutex_unlock(&registry->mutex);
    return outcome;
}

/* An item of registry_create_absent into the backend, unless its key has
 * a limit; whether it was created. Called with the mutex held; `live`
 * counts the limits, those created by this call's earlier items too. */
static bool create_one(struct registry *registry, struct registry_creation *item, size_t *live)
{
    struct limit_state state;
    item->error[0] = '\0';
    if (backend_get_limit(registry->backend, item->definition.key, &state) == 0) {
        item->outcome = REGISTRY_EXISTS;
        return false;
    }
    enum backend_admin_result put = BACKEND_ADMIN_TOO_MANY_LIMITS;
    if (*live < LIMITS_COUNT_MAX)
        put = backend_put_limit(registry->backend, &item->definition, &state, item->error,
                                sizeof item->error);
    if (put == BACKEND_ADMIN_OK) {
        item->outcome = REGISTRY_OK;
        (*live)++;
        return true;
    }
    item->outcome = put == BACKEND_ADMIN_UNAVAILABLE ? REGISTRY_BACKEND_FAILED : REGISTRY_REJECTED;
    if (put != BACKEND_ADMIN_INVALID && put != BACKEND_ADMIN_UNAVAILABLE)
        encode_admin_error(item->error, sizeof item->error, put, item->definition.key,
                           &item->definition, &state);
    return false;
}

void registry_create_absent_unsaved(struct registry *registry, struct registry_creation *items,
                                    size_t count)
{
    pthread_mutex_lock(&registry->mutex);
    size_t live = registry->count;
    for (size_t i = 0; i < count; i++)
        create_one(registry, &items[i], &live);
    registry->count = live; /* the file's, once saved */
    pthread_mutex_unlock(&registry->mutex);
}

enum registry_outcome registry_save_created(struct registry *registry, char *const *keys,
                                            size_t count)
{
    pthread_mutex_lock(&registry->mutex);
    enum registry_outcome outcome = REGISTRY_OK;
    if (registry_write(registry, NULL) != 0) {
        registry->dirty = true; /* whatever the undo gives, the ticker brings the file in line */
        outcome = REGISTRY_WRITE_FAILED;
        size_t undone = 0;
        for (size_t i = 0; i < count; i++) {
            enum backend_admin_result deleted = backend_delete_limit(registry->backend, keys[i]);
            if (deleted == BACKEND_ADMIN_OK)
                undone++;
            else if (deleted != BACKEND_ADMIN_UNKNOWN_KEY) /* deleted since: nothing to undo */
                outcome = REGISTRY_UNSAVED;
        }
        registry->count -= undone < registry->count ? undone : registry->count;
        log_write(LOG_ERROR,
                  outcome == REGISTRY_WRITE_FAILED
                      ? "limit creations undone: the registry file could not be written"
                      : "limits created but not saved: the registry file could not be written "
                        "and the backend could not undo them all",
                  NULL);
    }
    pthread_mutex_unlock(&registry->mutex);
    return outcome;
}

void registry_create_absent(struct registry *registry, struct registry_creation *items,
                            size_t count)
{
    pthread_mutex_lock(&registry->mutex);
    size_t live = registry->count, created = 0;
    for (size_t i = 0; i < count; i++)
        created += create_one(registry, &items[i], &live);
    if (created > 0 && registry_write(registry, NULL) != 0) {
        /* Each created one is undone, as a put's would be; one the backend
         * cannot delete stays in force, and the ticker saves it. */
        registry->dirty = true;
        for (size_t i = 0; i < count; i++) {
            if (items[i].outcome != REGISTRY_OK)
                continue;
            bool undone = backend_delete_limit(registry->backend, items[i].definition.key) ==
                          BACKEND_ADMIN_OK;
            items[i].outcome = undone ? REGISTRY_WRITE_FAILED : REGISTRY_UNSAVED;
            log_write(LOG_ERROR,
                      undone ? "limit creation undone: the registry file could not be written"
                             : "limit created but not saved: the registry file could not be "
                               "written and the backend could not undo it",
                      "key", items[i].definition.key, NULL);
        }
    }
    pthread_mutex_unlock(&registry->mutex);
}

enum registry_outcome registry_delete(struct registry *registry, const char *key)
{
    pthread_mutex_lock(&registry->mutex);
    enum registry_outcome outcome = REGISTRY_OK;
    struct limit_state state;
    if (backend_get_limit(registry->backend, key, &state) != 0) {
        outcome = REGISTRY_UNKNOWN;
    } else if (registry_write(registry, key) != 0) {
        outcome = REGISTRY_WRITE_FAILED; /* the file was not touched, nor the backend */
    } else if (backend_delete_limit(registry->backend, key) == BACKEND_ADMIN_UNAVAILABLE) {
        /* The file no longer names a limit the backend still has: put it
         * back, or leave it to the ticker (a start before that finishes
         * the delete). */
        if (registry_write(registry, NULL) != 0)
            registry->dirty = true;
        outcome = REGISTRY_BACKEND_FAILED;
    }
    pthread_mutex_unlock(&registry->mutex);
    return outcome;
}

/* Called with the mutex held. */
static enum registry_outcome save_locked(struct registry *registry)
{
    if (registry_write(registry, NULL) == 0)
        return REGISTRY_OK;
    registry->dirty = true;
    return REGISTRY_WRITE_FAILED;
}

enum registry_outcome registry_tick(struct registry *registry, bool changed)
{
    pthread_mutex_lock(&registry->mutex);
    enum registry_outcome outcome = REGISTRY_OK;
    if (changed)
        log_write(LOG_INFO, "limits changed by the ticker", NULL);
    if (changed || registry->dirty)
        outcome = save_locked(registry);
    pthread_mutex_unlock(&registry->mutex);
    return outcome;
}

enum registry_outcome registry_save(struct registry *registry)
{
    pthread_mutex_lock(&registry->mutex);
    enum registry_outcome outcome = save_locked(registry);
    pthread_mutex_unlock(&registry->mutex);
    return outcome;
}
