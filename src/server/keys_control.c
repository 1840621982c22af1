/* --control for keys (keys_control.h): the follower's side of the store's
 * keys (a stored value is checked as a keys.json entry is, and one that
 * does not decode or names another id is logged and skipped), and the
 * write of a change to the store, a compare-and-set on the revision this
 * front end last saw of the key, so two front ends changing one key at once
 * cannot both win. */
#include "keys_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/ctl_bounds.h"
#include "control/ctl_etcd.h"
#include "control/ctl_plane.h"
#include "metrics.h"
#include "util/arena.h"
#include "util/jdoc.h"
#include "util/log.h"

struct keys_control {
    struct ctl_plane *plane; /* the watch */
    struct ctl_etcd *etcd;   /* the writes (each call its own connection) */
    struct keys *keys;
    struct keys_draft *draft; /* the follower's, under the plane's lock */
    struct arena arena;       /* each stored value's parse, reset after it (the same) */
};

/* A stored value into the follower's draft for id name; 0, or -1 with error. */
static int decode_stored(struct keys_control *c, const char *name, const char *value, size_t length,
                         char *error, size_t error_size)
{
    char *text = malloc(length + 1);
    if (text == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    memcpy(text, value, length);
    text[length] = '\0';
    struct jdoc_value *root;
    memset(c->draft, 0, sizeof *c->draft);
    int result = jdoc_parse(text, length, &c->arena, &root, error, error_size);
    if (result == 0)
        result = keys_draft_apply(c->draft, root, KEYS_FIELDS_FILE, error, error_size);
    if (result == 0 && strcmp(c->draft->id, name) != 0) {
        snprintf(error, error_size, "id: the value names another key");
        result = -1;
    }
    arena_reset(&c->arena);
    free(text);
    return result;
}

static int follow_put(void *context, const char *name, const char *value, size_t length,
                      int64_t revision)
{
    struct keys_control *c = context;
    char error[256];
    if (decode_stored(c, name, value, length, error, sizeof error) != 0) {
        log_write(LOG_ERROR, "control plane: a stored key is invalid, skipped", "id", name,
                  "reason", error, NULL);
        return 0;
    }
    int done = keys_follow(c->keys, c->draft, revision, error, sizeof error);
    if (done > 0)
        log_write(LOG_ERROR, "control plane: a stored key was not applied", "id", name, "reason",
                  error, NULL);
    return done < 0 ? -1 : 0;
}

/* A key here that the store's whole read does not hold. Keys are revoked,
 * never deleted: one the store held once and was deleted from it by hand
 * stays here as it was (a revoked key must stay refused); one it never
 * held (made before --control was turned on) is written to it, so that
 * every front end serves it (keys_publish). The plane asks this for every
 * key here at its first whole read, and later only for keys it saw. */
static int follow_remove(void *context, const char *name)
{
    struct keys_control *c = context;
    return keys_publish(c->keys, name);
}

static int follow_names(void *context, char ***names, size_t *count)
{
    struct keys_control *c = context;
    *count = keys_ids(c->keys, names);
    return *names != NULL ? 0 : -1;
}

static int follow_flush(void *context)
{
    struct keys_control *c = context;
    keys_follow_flush(c->keys);
    return 0;
}

/* keys_store_fn: the change written to the store, if the key there is
 * still at base_revision. */
static enum keys_outcome store_write(void *context, const struct keys_record *record,
                                     int64_t base_revision, int64_t *revision)
{
    struct keys_control *c = context;
    char key[CTL_KEY_BYTES_MAX + 1];
    int n = snprintf(key, sizeof key, "%s%s", KEYS_CONTROL_PREFIX, record->id);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    keys_store_encode(&b, record);
    if (b.failed || n < 0 || (size_t)n >= sizeof key) {
        buffer_free(&b);
        return KEYS_NO_MEMORY;
    }
    bool succeeded = false;
    char error[256];
    int rc = ctl_etcd_put_if(c->etcd, key, (size_t)n, b.data, b.length, base_revision, &succeeded,
                             revision, error, sizeof error);
    buffer_free(&b);
    if (rc != 0) {
        log_write(LOG_WARN, "control plane: key change refused, the store did not take it", "id",
                  record->id, "reason", error, NULL);
        return KEYS_STORE_UNAVAILABLE;
    }
    if (!succeeded) {
        log_write(LOG_INFO, "control plane: key changed on another front end first", "id",
                  record->id, NULL);
        return KEYS_CHANGED_ELSEWHERE;
    }
    return KEYS_OK;
}

int keys_control_open(const char *url, struct ctl_prefetch *read, struct keys *keys,
                      struct keys_control **out, char *error, size_t error_size)
{
    *out = NULL;
    struct keys_control *c = calloc(1, sizeof *c);
    struct keys_draft *draft = malloc(sizeof *draft);
    if (c == NULL || draft == NULL) {
        ctl_prefetch_free(read);
        free(c);
        free(draft);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    c->keys = keys;
    c->draft = draft;
    arena_init(&c->arena, NULL, 0);
    static const struct ctl_plane_ops ops = {follow_put, follow_remove, follow_names, follow_flush,
                                             NULL};
    if (ctl_etcd_open(url, &c->etcd, error, error_size) != 0 ||
        ctl_plane_open(url, KEYS_CONTROL_PREFIX, &ops, c, &c->plane, error, error_size) != 0) {
        ctl_prefetch_free(read);
        keys_control_close(c);
        return -1;
    }
    keys_set_store(keys, store_write, c); /* before the first read: it publishes keys.json's */
    if (ctl_plane_start(c->plane, read) != 0) {
        snprintf(error, error_size, "cannot start the control plane's thread");
        keys_control_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

void keys_control_close(struct keys_control *c)
{
    if (c == NULL)
        return;
    if (c->plane != NULL)
        keys_set_store(c->keys, NULL, NULL);
    ctl_plane_close(c->plane);
    ctl_etcd_close(c->etcd);
    arena_free(&c->arena);
    free(c->draft);
    free(c);
}

void keys_control_status(const struct keys_control *c, bool *connected, int64_t *revision)
{
    *connected = ctl_plane_connected(c->plane);
    *revision = ctl_plane_revision(c->plane);
}

void keys_control_metrics_render(const struct keys_control *c, struct buffer *out)
{
    int64_t revision = ctl_plane_revision(c->plane);
    const struct metric_row rows[] = {
        {"llmlimit_control_keys_connected", "gauge",
         "1 while the control plane's watch of the store's keys runs; 0: serving the last view.",
         ctl_plane_connected(c->plane) ? 1u : 0u},
        {"llmlimit_control_keys_revision", "gauge",
         "The store's revision the Keys API's keys here are at.",
         revision > 0 ? (uint64_t)revision : 0u},
    };
    metrics_render_rows(out, rows, sizeof rows / sizeof rows[0]);
}
