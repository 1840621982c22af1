/* --control (control.h): the glue between the control plane's follower
 * (src/control) and the registry. A value in the store is a limit
 * definition's JSON as the API takes it ({"key":...,"kind":...}); one that
 * does not decode, or names another key than its own, is logged and
 * skipped: the store is trusted no more than a client. */
#include "control.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_plane.h"
#include "metrics.h"
#include "util/arena.h"
#include "util/jdoc.h"
#include "util/log.h"
#include "wait/wait.h"
#include "wire/decode.h"
#include "wire/encode.h"

/* Limits new here are created CONTROL_CREATE_BATCH at a time, and
 * limits.json is rewritten once at the end of the follower's batch (a whole
 * read: registry_create_absent_unsaved, registry_save_created): a front end that
 * joins finds every limit new, and a rewrite per limit, or per
 * CONTROL_CREATE_BATCH, would cost the square of their number. */
#define CONTROL_CREATE_BATCH 8192

struct control {
    struct ctl_plane *plane;
    struct registry *registry;
    struct backend *backend;
    struct wait *wait;
    struct registry_creation *pending; /* CONTROL_CREATE_BATCH; under the plane's lock */
    size_t pending_count;
    bool pending_sorted; /* by key (a whole read's order): found by binary search */
    char **created; /* keys of the limits created in this batch, not yet in limits.json */
    size_t created_count, created_capacity;
    bool unsaved; /* some were created in this batch (created_count may miss one: memory) */
    /* Keys of limits made here that the store could not take yet (control_publish). */
    pthread_mutex_t unpublished_lock;
    char **unpublished;
    size_t unpublished_count, unpublished_capacity;
    struct arena arena;  /* each stored value's parse, reset after it (the plane's lock) */
};

/* A stored value into a definition for name; 0, or -1 with error. One
 * arena for every parse: a block malloc'd and freed each time made a start
 * with 100,000 definitions grow and trim the heap 100,000 times. */
static int decode_stored(struct arena *arena, const char *name, const char *value, size_t length,
                         struct limit_definition *definition, char *error, size_t error_size)
{
    char *text = malloc(length + 1);
    if (text == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    memcpy(text, value, length);
    text[length] = '\0';
    struct jdoc_value *root;
    int result = jdoc_parse(text, length, arena, &root, error, error_size);
    if (result == 0)
        result = decode_definition(root, "", definition, error, error_size);
    if (result == 0 && strcmp(definition->key, name) != 0) {
        snprintf(error, error_size, "key: the value names another key");
        result = -1;
    }
    arena_reset(arena);
    free(text);
    return result;
}

static void changed(struct control *c, const char *key)
{
    if (c->wait != NULL)
        wait_limit_changed(c->wait, key); /* its waiters may fit now, or never */
}

/* Whether the definition is what this front end has in force already (or
 * is moving to, for a decrease that waits): then applying it again would
 * change nothing but cost a rewrite of limits.json, and on a start or a
 * read again after the store was lost every limit comes by. */
static bool in_force_already(struct control *c, const struct limit_definition *definition)
{
    struct limit_state state;
    if (backend_get_limit(c->backend, definition->key, &state) != 0)
        return false;
    if (state.status == LIMIT_DECREASING)
        state.definition.capacity = state.pending_decrease_to;
    struct buffer in_force, wanted;
    buffer_init(&in_force, NULL, 0);
    buffer_init(&wanted, NULL, 0);
    encode_definition_members(&in_force, &state.definition);
    encode_definition_members(&wanted, definition);
    bool same = !in_force.failed && !wanted.failed && in_force.length == wanted.length &&
                memcmp(in_force.data, wanted.data, wanted.length) == 0;
    buffer_free(&in_force);
    buffer_free(&wanted);
    return same;
}

/* A registry outcome as the follower takes it: a failure of this front
 * end's disk or backend is tried again; anything else is done. */
static int follow_outcome(enum registry_outcome outcome)
{
    return outcome == REGISTRY_WRITE_FAILED || outcome == REGISTRY_BACKEND_FAILED ? -1 : 0;
}

/* A pending creation that found the key made meanwhile (a gateway
 * template's default): the store's definition is put over it. */
static int put_over(struct control *c, const struct registry_creation *item)
{
    struct limit_state state;
    char error[DECODE_ERROR_SIZE];
    enum registry_outcome outcome =
        registry_put(c->registry, &item->definition, &state, error, sizeof error);
    if (outcome == REGISTRY_OK || outcome == REGISTRY_UNSAVED)
        changed(c, item->definition.key);
    else
        log_write(LOG_ERROR, "control plane: a stored definition was not applied", "key",
                  item->definition.key, "reason",
                  outcome == REGISTRY_REJECTED ? error : "registry or backend failed", NULL);
    return follow_outcome(outcome);
}

/* Keeps key among the batch's creations, so that they can be undone. Out
 * of memory (logged), one is not: when limits.json cannot be written it
 * stays in force unsaved, and the ticker writes the file. */
static void note_created(struct control *c, const char *key)
{
    if (c->created_count == c->created_capacity) {
        size_t capacity = c->created_capacity > 0 ? c->created_capacity * 2 : 1024;
        char **grown = realloc(c->created, capacity * sizeof *grown);
        if (grown == NULL)
            goto out_of_memory;
        c->created = grown;
        c->created_capacity = capacity;
    }
    char *copy = strdup(key);
    if (copy == NULL)
        goto out_of_memory;
    c->created[c->created_count++] = copy;
    return;
out_of_memory:
    log_write(LOG_ERROR, "control plane: out of memory", "key", key, NULL);
}

/* Creates the pending limits; -1 when some failed for now. The last of a
 * batch that created none before (a watch's few) writes limits.json as it
 * creates (registry_create_absent: one that cannot be saved is never seen
 * in force); others leave the write to the batch's end (follow_flush). */
static int create_pending(struct control *c, bool last)
{
    if (c->pending_count == 0)
        return 0;
    bool now = last && !c->unsaved;
    if (now)
        registry_create_absent(c->registry, c->pending, c->pending_count);
    else
        registry_create_absent_unsaved(c->registry, c->pending, c->pending_count);
    int result = 0;
    size_t created = 0;
    for (size_t i = 0; i < c->pending_count; i++) {
        const struct registry_creation *item = &c->pending[i];
        if (item->outcome == REGISTRY_OK || item->outcome == REGISTRY_UNSAVED) {
            if (!now)
                note_created(c, item->definition.key);
            changed(c, item->definition.key);
            created++;
        } else if (item->outcome == REGISTRY_EXISTS) {
            result |= put_over(c, item);
        } else {
            log_write(LOG_ERROR, "control plane: a stored definition was not applied", "key",
                      item->definition.key, "reason",
                      item->outcome == REGISTRY_REJECTED ? item->error
                                                         : "registry or backend failed",
                      NULL);
            result |= follow_outcome(item->outcome);
        }
    }
    char count[24];
    snprintf(count, sizeof count, "%zu", created);
    log_write(LOG_INFO, "control plane: limits created", "count", count, NULL);
    c->pending_count = 0;
    c->unsaved |= !now && created > 0;
    return result;
}

/* The end of the follower's batch: the pending limits created, and
 * limits.json written once for all created in it. When it cannot be
 * written they are undone (registry_save_created) and -1 has the follower
 * apply them again from the store. */
static int follow_flush(void *context)
{
    struct control *c = context;
    int result = create_pending(c, true);
    if (!c->unsaved)
        return result;
    c->unsaved = false;
    enum registry_outcome saved = registry_save_created(c->registry, c->created, c->created_count);
    for (size_t i = 0; i < c->created_count; i++) {
        if (saved != REGISTRY_OK)
            changed(c, c->created[i]); /* gone again */
        free(c->created[i]);
    }
    c->created_count = 0;
    return saved == REGISTRY_OK ? result : -1;
}

/* Whether key waits in the pending creations: a binary search while they
 * came in key order (a whole read), else a scan (a watch's few). */
static bool pending_has(const struct control *c, const char *key)
{
    if (c->pending_sorted) {
        size_t low = 0, high = c->pending_count;
        while (low < high) {
            size_t middle = low + (high - low) / 2;
            int order = strcmp(key, c->pending[middle].definition.key);
            if (order == 0)
                return true;
            if (order < 0)
                high = middle;
            else
                low = middle + 1;
        }
        return false;
    }
    for (size_t i = 0; i < c->pending_count; i++)
        if (strcmp(c->pending[i].definition.key, key) == 0)
            return true;
    return false;
}

/* The follower's put: a definition some front end wrote. */
static int follow_put(void *context, const char *name, const char *value, size_t length,
                      int64_t revision)
{
    (void)revision; /* the plane applies only newer ones */
    struct control *c = context;
    struct limit_definition definition;
    char error[DECODE_ERROR_SIZE];
    if (decode_stored(&c->arena, name, value, length, &definition, error, sizeof error) != 0) {
        log_write(LOG_ERROR, "control plane: a stored definition is invalid, skipped", "key", name,
                  "reason", error, NULL);
        return 0;
    }
    if (pending_has(c, name) && create_pending(c, false) != 0)
        return -1; /* its earlier change comes first */
    if (in_force_already(c, &definition))
        return 0;
    struct limit_state state;
    if (backend_get_limit(c->backend, name, &state) != 0) { /* new here: batched */
        if (c->pending_count == CONTROL_CREATE_BATCH && create_pending(c, false) != 0)
            return -1;
        if (c->pending_count == 0)
            c->pending_sorted = true;
        else if (strcmp(name, c->pending[c->pending_count - 1].definition.key) <= 0)
            c->pending_sorted = false;
        c->pending[c->pending_count++] = (struct registry_creation){.definition = definition};
        return 0;
    }
    enum registry_outcome outcome =
        registry_put(c->registry, &definition, &state, error, sizeof error);
    if (outcome != REGISTRY_OK && outcome != REGISTRY_UNSAVED) {
        log_write(LOG_ERROR, "control plane: a stored definition was not applied", "key", name,
                  "reason", outcome == REGISTRY_REJECTED ? error : "registry or backend failed",
                  NULL);
        return follow_outcome(outcome);
    }
    changed(c, name);
    char capacity[24];
    snprintf(capacity, sizeof capacity, "%" PRIu64, definition.capacity);
    log_write(LOG_INFO, "control plane: limit put", "key", name, "capacity", capacity, "status",
              limit_status_name(state.status), NULL);
    return 0;
}

static int follow_remove(void *context, const char *name)
{
    struct control *c = context;
    if (create_pending(c, false) != 0) /* a creation pending comes first */
        return -1;
    enum registry_outcome outcome = registry_delete(c->registry, name);
    if (outcome == REGISTRY_UNKNOWN)
        return 0;
    if (outcome != REGISTRY_OK) {
        log_write(LOG_ERROR, "control plane: a deletion was not applied", "key", name, NULL);
        return follow_outcome(outcome);
    }
    changed(c, name);
    log_write(LOG_INFO, "control plane: limit deleted", "key", name, NULL);
    return 0;
}

static int follow_names(void *context, char ***names, size_t *count)
{
    struct control *c = context;
    struct limit_name *listed = NULL;
    size_t live = 0;
    if (backend_list_names(c->backend, &listed, &live) != 0)
        return -1;
    char **out = calloc(live + 1, sizeof *out);
    if (out == NULL) {
        limit_names_free(listed, live);
        return -1;
    }
    for (size_t i = 0; i < live; i++)
        out[i] = listed[i].key; /* moved */
    free(listed);
    *names = out;
    *count = live;
    return 0;
}

static void follow_watching(void *context);

int control_open(const char *url, struct ctl_prefetch *read, struct registry *registry,
                 struct backend *backend, struct wait *wait, struct control **out, char *error,
                 size_t error_size)
{
    *out = NULL;
    struct control *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    *c = (struct control){.registry = registry, .backend = backend, .wait = wait};
    arena_init(&c->arena, NULL, 0);
    c->pending = calloc(CONTROL_CREATE_BATCH, sizeof *c->pending);
    if (c->pending == NULL) {
        ctl_prefetch_free(read);
        free(c);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&c->unpublished_lock, NULL);
    static const struct ctl_plane_ops ops = {follow_put, follow_remove, follow_names, follow_flush,
                                             follow_watching};
    if (ctl_plane_open(url, CONTROL_LIMITS_PREFIX, &ops, c, &c->plane, error, error_size) != 0) {
        ctl_prefetch_free(read);
        pthread_mutex_destroy(&c->unpublished_lock);
        free(c->pending);
        free(c);
        return -1;
    }
    if (ctl_plane_start(c->plane, read) != 0) {
        snprintf(error, error_size, "cannot start the control plane's thread");
        control_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

void control_close(struct control *control)
{
    if (control == NULL)
        return;
    ctl_plane_close(control->plane);
    arena_free(&control->arena);
    for (size_t i = 0; i < control->created_count; i++)
        free(control->created[i]);
    free(control->created);
    for (size_t i = 0; i < control->unpublished_count; i++)
        free(control->unpublished[i]);
    free(control->unpublished);
    pthread_mutex_destroy(&control->unpublished_lock);
    free(control->pending);
    free(control);
}

/* An admin change, applied under the follower's lock once stored. */
struct admin_change {
    struct control *control;
    const struct limit_definition *definition; /* a put's; NULL: a delete */
    const char *key;
    struct limit_state *state_out;
    int outcome;
    char *error;
    size_t error_size;
};

static int apply_admin(void *context)
{
    struct admin_change *change = context;
    struct control *c = change->control;
    assert(c->pending_count == 0); /* each batch is flushed under the lock */
    if (change->definition != NULL)
        change->outcome = registry_put(c->registry, change->definition, change->state_out,
                                       change->error, change->error_size);
    else
        change->outcome = registry_delete(c->registry, change->key);
    return follow_outcome((enum registry_outcome)change->outcome);
}

/* A put that could never apply (another kind or period than the limit in
 * force) is refused before the store sees it. */
static int precheck(struct control *c, const struct limit_definition *definition,
                    struct limit_state *in_force, char *error, size_t error_size)
{
    if (backend_get_limit(c->backend, definition->key, in_force) != 0)
        return 0;
    enum backend_admin_result check = limit_reshape_check(&in_force->definition, definition);
    if (check == BACKEND_ADMIN_OK)
        return 0;
    encode_admin_error(error, error_size, check, definition->key, definition, in_force);
    return -1;
}

static int write_change(struct control *c, struct admin_change *change, const char *value,
                        size_t length)
{
    bool applied = false;
    char reason[256];
    if (ctl_plane_write(c->plane, change->key, value, length, apply_admin, change, &applied, reason,
                        sizeof reason) != 0) {
        log_write(LOG_WARN, "control plane: change refused, the store did not take it", "key",
                  change->key, "reason", reason, NULL);
        return CONTROL_UNAVAILABLE;
    }
    if (!applied)
        return REGISTRY_OK; /* a later change won: it is in force */
    /* In the store, so in force for the other front ends: this one failed
     * to apply it for now, and the follower applies it again. */
    if (follow_outcome((enum registry_outcome)change->outcome) != 0)
        return REGISTRY_UNSAVED;
    return change->outcome;
}

int control_put(struct control *c, const struct limit_definition *definition,
                struct limit_state *state_out, char *error, size_t error_size)
{
    if (precheck(c, definition, state_out, error, error_size) != 0)
        return REGISTRY_REJECTED;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    encode_definition_members(&b, definition);
    buffer_append_char(&b, '}');
    if (b.failed) {
        buffer_free(&b);
        snprintf(error, error_size, "out of memory");
        return REGISTRY_REJECTED;
    }
    struct admin_change change = {c,           definition, definition->key, state_out,
                                  REGISTRY_OK, error,      error_size};
    int outcome = write_change(c, &change, b.data, b.length);
    buffer_free(&b);
    if (outcome == REGISTRY_OK && backend_get_limit(c->backend, definition->key, state_out) != 0)
        outcome = REGISTRY_BACKEND_FAILED; /* deleted by a later change meanwhile */
    return outcome;
}

int control_delete(struct control *c, const char *key, char *error, size_t error_size)
{
    struct limit_state state;
    if (backend_get_limit(c->backend, key, &state) != 0)
        return REGISTRY_UNKNOWN;
    struct admin_change change = {c, NULL, key, NULL, REGISTRY_OK, error, error_size};
    return write_change(c, &change, NULL, 0);
}

/* Writes definition to the store unless its key is there; false when the
 * store could not be asked (logged). */
static bool publish_one(struct control *c, const struct limit_definition *definition)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_char(&b, '{');
    encode_definition_members(&b, definition);
    buffer_append_char(&b, '}');
    bool created = false;
    char reason[256] = "out of memory";
    bool asked = !b.failed && ctl_plane_create(c->plane, definition->key, b.data, b.length,
                                               &created, reason, sizeof reason) == 0;
    if (!asked)
        log_write(LOG_WARN, "control plane: a limit made here is not in the store yet", "key",
                  definition->key, "reason", reason, NULL);
    else
        log_write(LOG_INFO,
                  created ? "control plane: a limit made here written to the store"
                          : "control plane: a limit made here was in the store already",
                  "key", definition->key, NULL);
    buffer_free(&b);
    return asked;
}

/* key is written to the store once the watch is set up again
 * (follow_watching). Out of memory it stays this front end's (logged). */
static void keep_unpublished(struct control *c, const char *key)
{
    pthread_mutex_lock(&c->unpublished_lock);
    char *copy = NULL;
    if (c->unpublished_count == c->unpublished_capacity) {
        size_t capacity = c->unpublished_capacity > 0 ? c->unpublished_capacity * 2 : 16;
        char **grown = realloc(c->unpublished, capacity * sizeof *grown);
        if (grown != NULL) {
            c->unpublished = grown;
            c->unpublished_capacity = capacity;
        }
    }
    if (c->unpublished_count < c->unpublished_capacity)
        copy = strdup(key);
    if (copy != NULL)
        c->unpublished[c->unpublished_count++] = copy;
    else
        log_write(LOG_ERROR, "control plane: out of memory, a limit made here stays its own",
                  "key", key, NULL);
    pthread_mutex_unlock(&c->unpublished_lock);
}

void control_publish(struct control *c, const struct registry_creation *items, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct limit_definition *definition = &items[i].definition;
        if (items[i].outcome != REGISTRY_OK && items[i].outcome != REGISTRY_UNSAVED)
            continue;
        if (!ctl_plane_connected(c->plane)) {
            log_write(LOG_WARN,
                      "control plane: a limit made here is not in the store yet (unreachable)",
                      "key", definition->key, NULL);
            keep_unpublished(c, definition->key);
        } else if (!publish_one(c, definition)) {
            keep_unpublished(c, definition->key);
        }
    }
}

/* The watch is set up (the store is read whole): the limits made here
 * while it could not be reached are written to it, as they are in force
 * now. One deleted here since is not; one the store holds is left. */
static void follow_watching(void *context)
{
    struct control *c = context;
    pthread_mutex_lock(&c->unpublished_lock);
    char **keys = c->unpublished;
    size_t count = c->unpublished_count;
    c->unpublished = NULL;
    c->unpublished_count = c->unpublished_capacity = 0;
    pthread_mutex_unlock(&c->unpublished_lock);
    for (size_t i = 0; i < count; i++) {
        struct limit_state state;
        if (backend_get_limit(c->backend, keys[i], &state) == 0) {
            if (state.status == LIMIT_DECREASING)
                state.definition.capacity = state.pending_decrease_to;
            if (!publish_one(c, &state.definition))
                keep_unpublished(c, keys[i]);
        }
        free(keys[i]);
    }
    free(keys);
}

void control_status(const struct control *c, bool *connected, int64_t *revision)
{
    *connected = ctl_plane_connected(c->plane);
    *revision = ctl_plane_revision(c->plane);
}

void control_metrics_render(const struct control *c, struct buffer *out)
{
    int64_t revision = ctl_plane_revision(c->plane);
    const struct metric_row rows[] = {
        {"llmlimit_control_connected", "gauge",
         "1 while the control plane's watch of the store runs; 0: serving the last view.",
         ctl_plane_connected(c->plane) ? 1u : 0u},
        {"llmlimit_control_revision", "gauge",
         "The store's revision the limit definitions here are at.",
         revision > 0 ? (uint64_t)revision : 0u},
    };
    metrics_render_rows(out, rows, sizeof rows / sizeof rows[0]);
}
