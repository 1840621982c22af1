/* The control plane's follower (ctl_plane.h). Every change is applied
 * under one lock, and only when its revision is newer than the last one
 * applied to its name (a sorted table of names and revisions, deletions
 * kept as tombstones), so a change written through this front end and the
 * same change seen again by the watch apply once, and an older change
 * never undoes a newer one whatever order they arrive in. */
#include "ctl_plane.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_bounds.h"
#include "ctl_etcd.h"
#include "util/log.h"

struct applied {
    char *name;
    int64_t revision;
};

struct ctl_plane {
    struct ctl_etcd *etcd;
    char prefix[CTL_KEY_BYTES_MAX / 2];
    size_t prefix_length;
    struct ctl_plane_ops ops;
    void *context;
    pthread_mutex_t lock;  /* applies, and the table */
    struct applied *table; /* sorted by name */
    size_t count, capacity;
    int64_t revision; /* atomic */
    int connected;    /* atomic */
    int stop;         /* atomic */
    int watch_stop;   /* atomic: ends the running watch (stop, or its member hangs) */
    pthread_mutex_t sleep_mutex;
    pthread_cond_t wake;
    pthread_t thread;
    pthread_t prober; /* asks the watched member now and then (ctl_etcd_probe) */
    bool started;
    bool synced; /* a whole read was applied once (under the lock) */
    int64_t started_at; /* the start's read's revision (0: it failed): the watch goes on from it */
    int resync;  /* atomic: a change failed to apply: read the store again */
};

static int compare_name(const void *a, const void *b)
{
    return strcmp(a, ((const struct applied *)b)->name);
}

/* The table's entry for name, or where it goes (*found false). */
static size_t table_find(const struct ctl_plane *p, const char *name, bool *found)
{
    size_t low = 0, high = p->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int order = compare_name(name, &p->table[middle]);
        if (order == 0) {
            *found = true;
            return middle;
        }
        if (order < 0)
            high = middle;
        else
            low = middle + 1;
    }
    *found = false;
    return low;
}

/* Records revision for name; false when it is not newer than the one
 * recorded (nothing to apply) or out of memory (logged). *previous gets
 * the revision recorded before (0: none). */
static bool table_claim(struct ctl_plane *p, const char *name, int64_t revision, int64_t *previous)
{
    bool found;
    size_t at = table_find(p, name, &found);
    *previous = 0;
    if (found) {
        if (p->table[at].revision >= revision)
            return false;
        *previous = p->table[at].revision;
        p->table[at].revision = revision;
        return true;
    }
    if (p->count == p->capacity) {
        size_t capacity = p->capacity > 0 ? p->capacity * 2 : 64;
        struct applied *grown = realloc(p->table, capacity * sizeof *grown);
        if (grown == NULL) {
            log_write(LOG_ERROR, "control plane: out of memory", "name", name, NULL);
            return false;
        }
        p->table = grown;
        p->capacity = capacity;
    }
    char *copy = strdup(name);
    if (copy == NULL) {
        log_write(LOG_ERROR, "control plane: out of memory", "name", name, NULL);
        return false;
    }
    memmove(p->table + at + 1, p->table + at, (p->count - at) * sizeof *p->table);
    p->table[at] = (struct applied){.name = copy, .revision = revision};
    p->count++;
    return true;
}

/* A claimed change did not apply: its name goes back to the revision
 * before, and the store is read again, so the change comes again. */
static void table_unclaim(struct ctl_plane *p, const char *name, int64_t previous)
{
    bool found;
    size_t at = table_find(p, name, &found);
    if (found)
        p->table[at].revision = previous;
    __atomic_store_n(&p->resync, 1, __ATOMIC_SEQ_CST);
}

/* The end of a batch; called with the lock held. A flush that failed
 * forgets every revision applied, so the next whole read applies all. */
static void flush_batch(struct ctl_plane *p)
{
    if (p->ops.flush == NULL || p->ops.flush(p->context) == 0)
        return;
    for (size_t i = 0; i < p->count; i++)
        p->table[i].revision = 0;
    __atomic_store_n(&p->resync, 1, __ATOMIC_SEQ_CST);
}

static void note_revision(struct ctl_plane *p, int64_t revision)
{
    if (revision > __atomic_load_n(&p->revision, __ATOMIC_RELAXED))
        __atomic_store_n(&p->revision, revision, __ATOMIC_RELAXED);
}

/* A key's name after the prefix, or NULL (not under it, empty, a NUL). */
static const char *name_of(const struct ctl_plane *p, const struct ctl_kv *kv)
{
    if (kv->key_length <= p->prefix_length || memcmp(kv->key, p->prefix, p->prefix_length) != 0 ||
        memchr(kv->key, '\0', kv->key_length) != NULL) {
        log_write(LOG_WARN, "control plane: a key that names nothing, ignored", NULL);
        return NULL;
    }
    return kv->key + p->prefix_length;
}

/* One change seen in the store; called with the lock held. */
static void apply_seen(struct ctl_plane *p, enum ctl_event_type type, const struct ctl_kv *kv)
{
    const char *name = name_of(p, kv);
    int64_t previous;
    if (name == NULL || !table_claim(p, name, kv->mod_revision, &previous))
        return;
    int done = type == CTL_EVENT_PUT
                   ? p->ops.put(p->context, name, kv->value, kv->value_length, kv->mod_revision)
                   : p->ops.remove(p->context, name);
    if (done != 0)
        table_unclaim(p, name, previous);
}

int ctl_plane_open(const char *url, const char *prefix, const struct ctl_plane_ops *ops,
                   void *context, struct ctl_plane **out, char *error, size_t error_size)
{
    *out = NULL;
    struct ctl_plane *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    p->prefix_length = strlen(prefix);
    assert(p->prefix_length > 0 && p->prefix_length < sizeof p->prefix);
    memcpy(p->prefix, prefix, p->prefix_length + 1);
    p->ops = *ops;
    p->context = context;
    if (ctl_etcd_open(url, &p->etcd, error, error_size) != 0) {
        free(p);
        return -1;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->sleep_mutex, NULL);
    pthread_cond_init(&p->wake, NULL);
    *out = p;
    return 0;
}

static int compare_kv_name(const void *a, const void *b)
{
    const struct ctl_kv *kv = b;
    return strcmp(a, kv->key);
}

/* After a whole read at range->revision: a name the local side holds that
 * the store does not is deleted, unless a change newer than the read is
 * applied already. The first read deletes every such name (the local side
 * starts as the store's copy); later ones only names that came from the
 * store, so what the local side made of its own since (the gateway's
 * limits from templates' defaults) stays. Called with the lock held. */
static void remove_absent(struct ctl_plane *p, const struct ctl_range *range)
{
    char **names = NULL;
    size_t count = 0;
    if (p->ops.names(p->context, &names, &count) != 0) {
        log_write(LOG_ERROR, "control plane: cannot list the local names", NULL);
        return;
    }
    char key[CTL_KEY_BYTES_MAX + 1];
    for (size_t i = 0; i < count; i++) {
        int n = snprintf(key, sizeof key, "%s%s", p->prefix, names[i]);
        bool in_store =
            n > 0 && (size_t)n < sizeof key &&
            bsearch(key, range->kvs, range->count, sizeof *range->kvs, compare_kv_name) != NULL;
        bool known = false;
        if (p->synced)
            table_find(p, names[i], &known);
        int64_t previous;
        if (!in_store && (!p->synced || known) &&
            table_claim(p, names[i], range->revision, &previous) &&
            p->ops.remove(p->context, names[i]) != 0)
            table_unclaim(p, names[i], previous);
        free(names[i]);
    }
    free(names);
}

/* Applies a whole read of the prefix (and frees it). */
static void apply_range(struct ctl_plane *p, struct ctl_range *range, int64_t *revision)
{
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < range->count; i++)
        apply_seen(p, CTL_EVENT_PUT, &range->kvs[i]);
    flush_batch(p);
    remove_absent(p, range);
    flush_batch(p);
    p->synced = true;
    pthread_mutex_unlock(&p->lock);
    note_revision(p, range->revision);
    *revision = range->revision;
    ctl_range_free(range);
}

/* Reads the prefix whole and applies it. 0, or -1 (logged by the caller). */
static int sync_all(struct ctl_plane *p, int64_t *revision, char *error, size_t error_size)
{
    struct ctl_range range;
    if (ctl_etcd_range_prefix(p->etcd, p->prefix, &range, error, error_size) != 0)
        return -1;
    apply_range(p, &range, revision);
    return 0;
}

static int on_watch(void *context, const struct ctl_watch_response *response)
{
    struct ctl_plane *p = context;
    if (response->created) {
        __atomic_store_n(&p->connected, 1, __ATOMIC_RELAXED);
        log_write(LOG_INFO, "control plane: watching the store", NULL);
        if (p->ops.watching != NULL)
            p->ops.watching(p->context);
    }
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < response->count; i++)
        apply_seen(p, response->events[i].type, &response->events[i].kv);
    flush_batch(p);
    pthread_mutex_unlock(&p->lock);
    note_revision(p, response->revision);
    return __atomic_load_n(&p->stop, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&p->resync, __ATOMIC_SEQ_CST);
}

/* Sleeps up to ms, or until the plane stops. */
static void pause_ms(struct ctl_plane *p, long ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->sleep_mutex);
    while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED) &&
           pthread_cond_timedwait(&p->wake, &p->sleep_mutex, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&p->sleep_mutex);
}

/* The store went away (or was never reached): said once per streak. */
static void lost(struct ctl_plane *p, const char *what, const char *error)
{
    if (__atomic_exchange_n(&p->connected, 0, __ATOMIC_RELAXED) != 0)
        log_write(LOG_WARN, "control plane: store unreachable, serving the last view", "step", what,
                  "reason", error, NULL);
}

/* A change failed to apply here (ops said -1): true after a pause (that
 * grows while it keeps failing), so that the caller reads the store again. */
static bool again_after_failure(struct ctl_plane *p, long *retry_ms)
{
    if (!__atomic_exchange_n(&p->resync, 0, __ATOMIC_SEQ_CST))
        return false;
    log_write(LOG_WARN, "control plane: a change did not apply here, reading the store again",
              NULL);
    pause_ms(p, *retry_ms);
    *retry_ms = *retry_ms * 2 > CTL_RETRY_MS_LAST ? CTL_RETRY_MS_LAST : *retry_ms * 2;
    return true;
}

static void *watcher(void *context)
{
    struct ctl_plane *p = context;
    long retry_ms = CTL_RETRY_MS_FIRST;
    bool logged = false;
    /* The start read the store whole already: its watch begins there, not
     * with a second read (a start with 100,000 names read them twice). */
    int64_t first = p->started_at;
    while (!__atomic_load_n(&p->stop, __ATOMIC_RELAXED)) {
        char error[256] = "";
        int64_t revision = first;
        first = 0;
        if (revision == 0 && sync_all(p, &revision, error, sizeof error) != 0) {
            if (!logged)
                log_write(LOG_WARN, "control plane: cannot read the store, serving the last view",
                          "reason", error, NULL);
            logged = true;
            lost(p, "range", error);
            pause_ms(p, retry_ms);
            retry_ms = retry_ms * 2 > CTL_RETRY_MS_LAST ? CTL_RETRY_MS_LAST : retry_ms * 2;
            continue;
        }
        if (logged)
            log_write(LOG_INFO, "control plane: store reached again, caught up", NULL);
        logged = false;
        if (again_after_failure(p, &retry_ms))
            continue;
        retry_ms = CTL_RETRY_MS_FIRST;
        bool compacted = false;
        /* A close between the two stores still ends the watch: it sets
         * stop before watch_stop. */
        __atomic_store_n(&p->watch_stop, 0, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST))
            __atomic_store_n(&p->watch_stop, 1, __ATOMIC_SEQ_CST);
        if (ctl_etcd_watch(p->etcd, p->prefix, revision + 1, on_watch, p, &p->watch_stop,
                           &compacted, error, sizeof error) != 0) {
            lost(p, "watch", error);
            pause_ms(p, CTL_RETRY_MS_FIRST);
        } else if (!__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST) &&
                   !again_after_failure(p, &retry_ms)) {
            lost(p, "probe", "the watched member did not answer"); /* the prober ended it */
        }
    }
    return NULL;
}

/* A watch only learns of a member that closes its connection; one that
 * hangs (stopped, cut off from its majority) is found by asking it. Asked
 * also before the watch says it is set up: a watch begun on a member that
 * hangs would otherwise never say so, nor end. */
static void *prober(void *context)
{
    struct ctl_plane *p = context;
    while (!__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST)) {
        pause_ms(p, CTL_PROBE_INTERVAL_MS);
        char error[256];
        if (__atomic_load_n(&p->stop, __ATOMIC_SEQ_CST) ||
            ctl_etcd_probe(p->etcd, p->prefix, error, sizeof error) == 0)
            continue;
        log_write(LOG_WARN, "control plane: the watched member does not answer, watching another",
                  "reason", error, NULL);
        __atomic_store_n(&p->watch_stop, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

struct ctl_prefetch {
    struct ctl_etcd *etcd;
    char prefix[CTL_KEY_BYTES_MAX / 2];
    pthread_t thread;
    bool joined;
    int result; /* ctl_etcd_range_prefix's */
    struct ctl_range range;
    char error[256];
};

static void *prefetch_read(void *context)
{
    struct ctl_prefetch *f = context;
    f->result = ctl_etcd_range_prefix(f->etcd, f->prefix, &f->range, f->error, sizeof f->error);
    return NULL;
}

int ctl_prefetch_begin(const char *url, const char *prefix, struct ctl_prefetch **out, char *error,
                       size_t error_size)
{
    *out = NULL;
    assert(strlen(prefix) > 0 && strlen(prefix) < CTL_KEY_BYTES_MAX / 2);
    struct ctl_prefetch *f = calloc(1, sizeof *f);
    if (f == NULL) {
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    snprintf(f->prefix, sizeof f->prefix, "%s", prefix);
    if (ctl_etcd_open(url, &f->etcd, error, error_size) != 0) {
        free(f);
        return -1;
    }
    if (pthread_create(&f->thread, NULL, prefetch_read, f) != 0) {
        ctl_etcd_close(f->etcd);
        free(f);
        snprintf(error, error_size, "cannot start the control plane's reading thread");
        return -1;
    }
    *out = f;
    return 0;
}

static void prefetch_join(struct ctl_prefetch *f)
{
    if (!f->joined)
        pthread_join(f->thread, NULL);
    f->joined = true;
}

void ctl_prefetch_free(struct ctl_prefetch *f)
{
    if (f == NULL)
        return;
    prefetch_join(f);
    if (f->result == 0)
        ctl_range_free(&f->range);
    ctl_etcd_close(f->etcd);
    free(f);
}

int ctl_plane_start(struct ctl_plane *p, struct ctl_prefetch *prefetch)
{
    char error[256];
    int64_t revision = 0;
    int read = 0;
    if (prefetch != NULL) {
        assert(strcmp(prefetch->prefix, p->prefix) == 0);
        prefetch_join(prefetch);
        read = prefetch->result;
        if (read == 0) {
            apply_range(p, &prefetch->range, &revision);
            prefetch->result = -1; /* its range is freed */
        } else {
            snprintf(error, sizeof error, "%s", prefetch->error);
        }
        ctl_prefetch_free(prefetch);
    } else {
        read = sync_all(p, &revision, error, sizeof error);
    }
    if (read != 0)
        log_write(LOG_WARN, "control plane: cannot read the store at start, serving the local view",
                  "reason", error, NULL);
    else
        p->started_at = revision;
    if (pthread_create(&p->thread, NULL, watcher, p) != 0)
        return -1;
    if (pthread_create(&p->prober, NULL, prober, p) != 0) {
        __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&p->watch_stop, 1, __ATOMIC_SEQ_CST);
        pthread_join(p->thread, NULL);
        return -1;
    }
    p->started = true;
    return 0;
}

void ctl_plane_close(struct ctl_plane *p)
{
    if (p == NULL)
        return;
    __atomic_store_n(&p->stop, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->watch_stop, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&p->sleep_mutex);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->sleep_mutex);
    if (p->started) {
        pthread_join(p->thread, NULL);
        pthread_join(p->prober, NULL);
    }
    for (size_t i = 0; i < p->count; i++)
        free(p->table[i].name);
    free(p->table);
    ctl_etcd_close(p->etcd);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->sleep_mutex);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int ctl_plane_write(struct ctl_plane *p, const char *name, const char *value, size_t value_length,
                    int (*apply)(void *context), void *context, bool *applied, char *error,
                    size_t error_size)
{
    *applied = false;
    char key[CTL_KEY_BYTES_MAX + 1];
    int n = snprintf(key, sizeof key, "%s%s", p->prefix, name);
    if (n < 0 || (size_t)n >= sizeof key) {
        snprintf(error, error_size, "name too long for the store");
        return -1;
    }
    int64_t revision = 0, deleted = 0;
    /* Held across the write, so the watch cannot apply it first: the
     * writer learns how its own change went. */
    pthread_mutex_lock(&p->lock);
    int written = value != NULL ? ctl_etcd_put(p->etcd, key, (size_t)n, value, value_length,
                                               &revision, error, error_size)
                                : ctl_etcd_delete(p->etcd, key, (size_t)n, &revision, &deleted,
                                                  error, error_size);
    int64_t previous;
    if (written == 0 && table_claim(p, name, revision, &previous)) {
        if (apply(context) != 0)
            table_unclaim(p, name, previous);
        *applied = true;
    }
    pthread_mutex_unlock(&p->lock);
    if (written != 0)
        return -1; /* the caller answers 503 and logs it */
    note_revision(p, revision);
    return 0;
}

int ctl_plane_create(struct ctl_plane *p, const char *name, const char *value, size_t value_length,
                     bool *created, char *error, size_t error_size)
{
    *created = false;
    char key[CTL_KEY_BYTES_MAX + 1];
    int n = snprintf(key, sizeof key, "%s%s", p->prefix, name);
    if (n < 0 || (size_t)n >= sizeof key) {
        snprintf(error, error_size, "name too long for the store");
        return -1;
    }
    int64_t revision = 0, previous;
    pthread_mutex_lock(&p->lock);
    int written = ctl_etcd_put_if(p->etcd, key, (size_t)n, value, value_length, 0, created,
                                  &revision, error, error_size);
    if (written == 0 && *created)
        table_claim(p, name, revision, &previous); /* in force here already */
    pthread_mutex_unlock(&p->lock);
    if (written == 0)
        note_revision(p, revision);
    return written;
}

bool ctl_plane_connected(const struct ctl_plane *p)
{
    return __atomic_load_n(&p->connected, __ATOMIC_RELAXED) != 0;
}

int64_t ctl_plane_revision(const struct ctl_plane *p)
{
    return __atomic_load_n(&p->revision, __ATOMIC_RELAXED);
}
