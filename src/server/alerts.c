/* Alerts (see alerts.h, docs/alerts.md): the kept alerts and their file,
 * the scanner that fires them, and GET /v1/alerts. The sender is in
 * alert_send.c, an alert's own JSON and id in alert_record.c. */
#include "alerts_internal.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hex.h"
#include "registry.h"
#include "spend.h"
#include "util/arena.h"
#include "util/file.h"
#include "util/jdoc.h"
#include "util/log.h"

/* An alert with its delivery state (GET /v1/alerts and the file). */
static void encode_kept(struct buffer *b, const struct alert *a)
{
    buffer_append_char(b, '{');
    alert_encode_fields(b, a);
    buffer_append_char(b, ',');
    buffer_member_string(b, "delivery", alert_delivery_name(a->delivery));
    buffer_append_char(b, ',');
    buffer_member_string(b, "webhook", a->webhook);
    buffer_append_char(b, ',');
    buffer_member_string(b, "format", alert_format_name(a->format));
    buffer_append_char(b, ',');
    buffer_member_u64(b, "attempts", a->attempts);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "next_attempt_unix_ms", a->next_attempt_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "delivered_at_unix_ms", a->delivered_at_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_string(b, "last_error", a->last_error);
    buffer_append_str(b, a->claimed ? ",\"claimed\":true}" : ",\"claimed\":false}");
}

/* ---- The file. */

static bool copy_string(const struct jdoc_value *v, char *out, size_t size)
{
    if (v == NULL || !jdoc_is(v, JDOC_STRING) || v->count >= size ||
        strlen(v->as.string) != v->count)
        return false;
    memcpy(out, v->as.string, (size_t)v->count + 1);
    return true;
}

static bool get_i64(const struct jdoc_value *object, const char *name, int64_t min, int64_t *out)
{
    const struct jdoc_value *v = jdoc_get(object, name);
    if (v == NULL || !jdoc_is(v, JDOC_INTEGER) || v->as.integer < min)
        return false;
    *out = v->as.integer;
    return true;
}

static bool get_u64(const struct jdoc_value *object, const char *name, uint64_t max, uint64_t *out)
{
    int64_t value;
    if (!get_i64(object, name, 0, &value) || (uint64_t)value > max)
        return false;
    *out = (uint64_t)value;
    return true;
}

static bool decode_names(const struct jdoc_value *o, struct alert *a)
{
    char text[32];
    if (!copy_string(jdoc_get(o, "type"), text, sizeof text) ||
        alert_type_parse(text, &a->type) != 0)
        return false;
    if (!copy_string(jdoc_get(o, "kind"), text, sizeof text) ||
        limit_kind_parse(text, &a->kind) != 0)
        return false;
    if (!copy_string(jdoc_get(o, "delivery"), text, sizeof text) ||
        alert_delivery_parse(text, &a->delivery) != 0)
        return false;
    return copy_string(jdoc_get(o, "format"), text, sizeof text) &&
           alert_format_parse(text, &a->format) == 0;
}

/* One kept alert of the file; false when it is not one. */
static bool decode_kept(const struct jdoc_value *o, struct alert *a)
{
    memset(a, 0, sizeof *a);
    uint64_t percent = 0, attempts = 0;
    const struct jdoc_value *at = jdoc_get(o, "at_percent");
    if (!jdoc_is(o, JDOC_OBJECT) || !copy_string(jdoc_get(o, "id"), a->id, sizeof a->id) ||
        strlen(a->id) != ALERT_ID_HEX_LENGTH ||
        !copy_string(jdoc_get(o, "key"), a->key, sizeof a->key) || !decode_names(o, a) ||
        !copy_string(jdoc_get(o, "webhook"), a->webhook, sizeof a->webhook) ||
        !copy_string(jdoc_get(o, "last_error"), a->last_error, sizeof a->last_error) ||
        at == NULL || (!jdoc_is(at, JDOC_NULL) && !get_u64(o, "at_percent", 1000, &percent)) ||
        !get_u64(o, "used", UINT64_MAX, &a->used) || !get_u64(o, "debt", UINT64_MAX, &a->debt) ||
        !get_u64(o, "capacity", UINT64_MAX, &a->capacity) ||
        !get_u64(o, "attempts", UINT32_MAX, &attempts) ||
        !get_i64(o, "period_start_unix_ms", INT64_MIN, &a->period_start_unix_ms) ||
        !get_i64(o, "period_end_unix_ms", INT64_MIN, &a->period_end_unix_ms) ||
        !get_i64(o, "at_unix_ms", INT64_MIN, &a->at_unix_ms) ||
        !get_i64(o, "next_attempt_unix_ms", INT64_MIN, &a->next_attempt_unix_ms) ||
        !get_i64(o, "delivered_at_unix_ms", INT64_MIN, &a->delivered_at_unix_ms))
        return false;
    if (a->webhook[0] != '\0' && !webhook_url_valid(a->webhook))
        return false;
    const struct jdoc_value *claimed = jdoc_get(o, "claimed");
    if (claimed == NULL || (!jdoc_is(claimed, JDOC_TRUE) && !jdoc_is(claimed, JDOC_FALSE)))
        return false;
    a->claimed = jdoc_is(claimed, JDOC_TRUE);
    a->at_percent = (uint16_t)percent;
    a->attempts = (uint32_t)attempts;
    a->saved = true;
    return true;
}

static int load_file(struct alerts *alerts, char *error, size_t error_size)
{
    unlink(alerts->tmp_path); /* a rewrite cut short: never read */
    char *text = NULL;
    size_t length = 0;
    int rc = file_read_all(alerts->path, ALERTS_FILE_BYTES_MAX, &text, &length, error, error_size);
    if (rc == 1)
        return 0; /* none yet */
    if (rc != 0)
        return -1;
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char reason[256];
    rc = jdoc_parse_nested(text, length, 4, &arena, &root, reason, sizeof reason);
    if (rc != 0 || !jdoc_is(root, JDOC_ARRAY) || root->count > ALERTS_KEPT_MAX) {
        snprintf(error, error_size, "%s: %s", alerts->path,
                 rc != 0 ? reason : "must be an array of at most 1000 alerts");
        rc = -1;
    }
    for (uint32_t i = 0; rc == 0 && i < root->count; i++) {
        if (!decode_kept(&root->as.items[i], &alerts->kept[i])) {
            snprintf(error, error_size, "%s: line %u: not an alert", alerts->path,
                     root->as.items[i].line);
            rc = -1;
        }
        alerts->kept_count = rc == 0 ? i + 1 : 0;
    }
    arena_free(&arena);
    free(text);
    return rc;
}

/* Rewrites alerts.json when something changed; marks every alert saved.
 * Mutex held; the write itself is small (ALERTS_KEPT_MAX alerts). */
static void save_locked(struct alerts *alerts)
{
    if (!alerts->dirty)
        return;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    b.capacity_max = ALERTS_FILE_BYTES_MAX;
    buffer_append_str(&b, "[\n");
    for (uint32_t i = 0; i < alerts->kept_count; i++) {
        if (i > 0)
            buffer_append_str(&b, ",\n");
        encode_kept(&b, &alerts->kept[i]);
    }
    buffer_append_str(&b, alerts->kept_count > 0 ? "\n]\n" : "]\n");
    int saved_errno = ENOMEM;
    const char *step = b.failed ? "encode"
                                : file_replace(alerts->path, alerts->tmp_path, alerts->dir, b.data,
                                               b.length, &saved_errno);
    buffer_free(&b);
    if (step != NULL) {
        if (!alerts->write_failed)
            log_write(LOG_ERROR, "alerts write failed", "file", alerts->path, "step", step,
                      "reason", strerror(saved_errno), NULL);
        alerts->write_failed = true;
        return;
    }
    alerts->write_failed = false;
    alerts->dirty = false;
    for (uint32_t i = 0; i < alerts->kept_count; i++)
        alerts->kept[i].saved = true;
}

/* Room for one more kept alert: the oldest one no longer pending goes
 * (first one whose period is over: it can never fire again). false when
 * every kept alert is pending or in flight. */
static bool make_room_locked(struct alerts *alerts, int64_t now_ms)
{
    if (alerts->kept_count < ALERTS_KEPT_MAX)
        return true;
    uint32_t victim = UINT32_MAX;
    for (int pass = 0; pass < 2 && victim == UINT32_MAX; pass++) {
        for (uint32_t i = 0; i < alerts->kept_count; i++) {
            const struct alert *a = &alerts->kept[i];
            if (a->delivery == ALERT_PENDING || a->in_flight)
                continue;
            if (pass == 0 && a->period_end_unix_ms > now_ms)
                continue;
            victim = i;
            break;
        }
    }
    if (victim == UINT32_MAX)
        return false;
    memmove(&alerts->kept[victim], &alerts->kept[victim + 1],
            (alerts->kept_count - victim - 1) * sizeof alerts->kept[0]);
    alerts->kept_count--;
    return true;
}

/* ---- The scanner. */

struct usage_wait {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
};

static void usage_done(void *context)
{
    struct usage_wait *w = context;
    pthread_mutex_lock(&w->mutex);
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
}

/* The watched limits again, from the backend, when the registry changed.
 * Keeps each level's start of a limit watched before. */
static void watch_refresh(struct alerts *alerts)
{
    uint64_t generation = registry_generation(alerts->registry);
    if (generation == alerts->registry_generation)
        return;
    struct limit_state *states = NULL;
    size_t count = 0;
    if (backend_list_limits(alerts->backend, &states, &count) != 0)
        return; /* the next scan tries again */
    struct alert_watch *fresh = calloc(ALERTS_LIMITS_MAX, sizeof *fresh);
    if (fresh == NULL) {
        free(states);
        return;
    }
    uint32_t n = 0, old = 0;
    for (size_t i = 0; i < count && n < ALERTS_LIMITS_MAX; i++) {
        const struct limit_definition *d = &states[i].definition;
        if (d->alert_count == 0)
            continue;
        fresh[n].definition = *d;
        /* Both sorted by key: the old entry of this key, if any. */
        while (old < alerts->watched_count &&
               strcmp(alerts->watched[old].definition.key, d->key) < 0)
            old++;
        if (old < alerts->watched_count &&
            strcmp(alerts->watched[old].definition.key, d->key) == 0 &&
            limit_alerts_same(&alerts->watched[old].definition, d)) {
            memcpy(fresh[n].level_since_unix_ms, alerts->watched[old].level_since_unix_ms,
                   sizeof fresh[n].level_since_unix_ms);
            memcpy(fresh[n].level_below_since_unix_ms,
                   alerts->watched[old].level_below_since_unix_ms,
                   sizeof fresh[n].level_below_since_unix_ms);
        }
        n++;
    }
    free(states);
    free(alerts->watched);
    alerts->watched = fresh;
    alerts->watched_count = n;
    alerts->registry_generation = generation;
}

/* The amount at which threshold percent of capacity is reached:
 * ceil(capacity * percent / 100), without overflow (capacity <= 2^63). */
static uint64_t threshold_amount(uint64_t capacity, uint16_t percent)
{
    uint64_t q = capacity / 100, r = capacity % 100;
    return q * percent + (r * percent + 99) / 100;
}

struct firing {
    const struct alert_watch *watch;
    const struct limit_usage *usage;
    const struct limit_alert *threshold;
    int64_t period_start_ms, period_end_ms, now_ms;
};

/* Fires one alert unless its id fired already (mutex held). true when a
 * new alert is kept. */
static bool fire_locked(struct alerts *alerts, const struct firing *f)
{
    char id[ALERT_ID_HEX_LENGTH + 1];
    const struct limit_definition *d = &f->watch->definition;
    alert_id(d->key, f->threshold, f->period_start_ms, id);
    if (alerts_find_locked(alerts, id) != NULL)
        return false;
    if (!make_room_locked(alerts, f->now_ms)) {
        alerts->stats.dropped++;
        return false;
    }
    struct alert *a = &alerts->kept[alerts->kept_count++];
    memset(a, 0, sizeof *a);
    memcpy(a->id, id, sizeof a->id);
    a->type = f->threshold->runout ? ALERT_RUNOUT : ALERT_THRESHOLD;
    snprintf(a->key, sizeof a->key, "%s", d->key);
    a->kind = d->kind;
    a->at_percent = f->threshold->at_percent;
    a->used = f->usage->used;
    a->debt = f->usage->debt;
    a->capacity = d->capacity;
    a->period_start_unix_ms = f->period_start_ms;
    a->period_end_unix_ms = f->period_end_ms;
    a->at_unix_ms = f->now_ms;
    bool own = d->webhook[0] != '\0';
    snprintf(a->webhook, sizeof a->webhook, "%s", own ? d->webhook : alerts->webhook);
    a->format = own ? d->webhook_format : alerts->format;
    a->delivery = a->webhook[0] != '\0' ? ALERT_PENDING : ALERT_UNSENT;
    /* A backend other front ends share decides which of them delivers it. */
    a->claimed = alerts->backend->ops->claim == NULL || a->delivery == ALERT_UNSENT;
    a->next_attempt_unix_ms = f->now_ms;
    alerts->stats.fired++;
    alerts->dirty = true;
    log_write(LOG_INFO, "alert fired", "key", a->key, "type", alert_type_name(a->type), "id", a->id,
              NULL);
    return true;
}

static bool runs_out(struct alerts *alerts, const struct limit_usage *u, int64_t now_ms)
{
    if (alerts->spend == NULL)
        return false;
    struct spend_history *history = malloc(sizeof *history);
    if (history == NULL)
        return false;
    spend_history(alerts->spend, u->state.definition.key, u->period_start_unix_ms, history);
    struct spend_projection p;
    spend_project(history->recent, history->recent_count, u, now_ms, &p);
    free(history);
    return p.rate_known && p.runs_out && p.runs_out_at_unix_ms < u->period_end_unix_ms;
}

/* Whether alert i of a watched limit is due now; sets its period. */
static bool alert_due(struct alerts *alerts, struct alert_watch *w, uint32_t i,
                      const struct limit_usage *u, struct firing *f)
{
    const struct limit_definition *d = &w->definition;
    const struct limit_alert *t = &d->alerts[i];
    uint64_t capacity = u->state.definition.capacity;
    if (d->kind == LIMIT_BUDGET) {
        f->period_start_ms = u->period_start_unix_ms;
        f->period_end_ms = u->period_end_unix_ms;
        if (t->runout)
            return runs_out(alerts, u, f->now_ms);
        return amount_add_saturating(u->used, u->debt) >= threshold_amount(capacity, t->at_percent);
    }
    /* Rolling and concurrency: at the level for a whole window (the hold
     * duration), once per UTC day. */
    int64_t day =
        f->now_ms >= 0 ? f->now_ms / ALERT_DAY_MS : -((-f->now_ms - 1) / ALERT_DAY_MS) - 1;
    f->period_start_ms = day * ALERT_DAY_MS;
    f->period_end_ms = f->period_start_ms + ALERT_DAY_MS;
    uint64_t level = amount_add_saturating(u->reserved, u->used);
    if (level < threshold_amount(capacity, t->at_percent)) {
        if (w->level_below_since_unix_ms[i] == 0)
            w->level_below_since_unix_ms[i] = f->now_ms;
        if (f->now_ms - w->level_below_since_unix_ms[i] >= ALERT_LEVEL_DIP_MS)
            w->level_since_unix_ms[i] = 0;
        return false;
    }
    w->level_below_since_unix_ms[i] = 0;
    if (w->level_since_unix_ms[i] == 0)
        w->level_since_unix_ms[i] = f->now_ms;
    return f->now_ms - w->level_since_unix_ms[i] >= limit_hold_duration_ms(&u->state.definition);
}

static bool check_limit(struct alerts *alerts, struct alert_watch *w, const struct limit_usage *u,
                        int64_t now_ms)
{
    bool fired = false;
    for (uint32_t i = 0; i < w->definition.alert_count; i++) {
        struct firing f = {
            .watch = w, .usage = u, .threshold = &w->definition.alerts[i], .now_ms = now_ms};
        if (!alert_due(alerts, w, i, u, &f))
            continue;
        pthread_mutex_lock(&alerts->mutex);
        fired |= fire_locked(alerts, &f);
        pthread_mutex_unlock(&alerts->mutex);
    }
    return fired;
}

/* Reads the usage of watched[first..first+count) and checks each. */
static bool scan_batch(struct alerts *alerts, uint32_t first, uint32_t count, int64_t now_ms)
{
    assert(count <= USAGE_BATCH_MAX);
    struct usage_request *requests = calloc(count, sizeof *requests);
    struct usage_result *results = calloc(count, sizeof *results);
    bool fired = false;
    if (requests != NULL && results != NULL) {
        for (uint32_t i = 0; i < count; i++)
            requests[i] = (struct usage_request){.key = alerts->watched[first + i].definition.key,
                                                 .at_unix_ms = now_ms};
        struct usage_wait w = {.done = false};
        pthread_mutex_init(&w.mutex, NULL);
        pthread_cond_init(&w.cond, NULL);
        backend_usage_batch(alerts->backend, requests, results, count, usage_done, &w);
        pthread_mutex_lock(&w.mutex);
        while (!w.done)
            pthread_cond_wait(&w.cond, &w.mutex);
        pthread_mutex_unlock(&w.mutex);
        pthread_mutex_destroy(&w.mutex);
        pthread_cond_destroy(&w.cond);
        for (uint32_t i = 0; i < count; i++) {
            if (results[i].result == BACKEND_ADMIN_OK)
                fired |=
                    check_limit(alerts, &alerts->watched[first + i], &results[i].usage, now_ms);
        }
    }
    free(requests);
    free(results);
    return fired;
}

/* Claims the saved alerts not yet claimed (backend_ops.claim): each is
 * then this front end's to deliver, or another's ("elsewhere"). One that
 * the backend did not answer stays unclaimed until the next scan. true when
 * one was claimed here. */
static bool claim_saved(struct alerts *alerts)
{
    enum { CLAIMS_PER_SCAN = 16 };
    char ids[CLAIMS_PER_SCAN][ALERT_ID_HEX_LENGTH + 1];
    uint32_t n = 0;
    pthread_mutex_lock(&alerts->mutex);
    for (uint32_t i = 0; i < alerts->kept_count && n < CLAIMS_PER_SCAN; i++) {
        if (!alerts->kept[i].claimed && alerts->kept[i].saved)
            memcpy(ids[n++], alerts->kept[i].id, sizeof ids[0]);
    }
    pthread_mutex_unlock(&alerts->mutex);
    bool mine_any = false;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t name[SHA256_DIGEST_BYTES];
        for (int j = 0; j < SHA256_DIGEST_BYTES; j++)
            name[j] =
                (uint8_t)(hex_digit_value(ids[i][2 * j]) << 4 | hex_digit_value(ids[i][2 * j + 1]));
        bool mine = false;
        if (alerts->backend->ops->claim(alerts->backend, name, alerts->owner, &mine) != 0)
            break; /* the store does not answer: the next scan tries again, one wait per scan */
        pthread_mutex_lock(&alerts->mutex);
        struct alert *a = alerts_find_locked(alerts, ids[i]);
        if (a != NULL && !a->claimed) {
            a->claimed = true;
            if (!mine)
                a->delivery = ALERT_ELSEWHERE;
            alerts->dirty = true;
            mine_any |= mine;
        }
        pthread_mutex_unlock(&alerts->mutex);
    }
    return mine_any;
}

void alerts_scan(struct alerts *alerts)
{
    watch_refresh(alerts);
    int64_t now_ms = clock_now_ms(alerts->clock);
    bool fired = false;
    for (uint32_t first = 0; first < alerts->watched_count; first += USAGE_BATCH_MAX) {
        uint32_t left = alerts->watched_count - first;
        fired |= scan_batch(alerts, first, left < USAGE_BATCH_MAX ? left : USAGE_BATCH_MAX, now_ms);
    }
    pthread_mutex_lock(&alerts->mutex);
    save_locked(alerts); /* new alerts first, so a crash after a send never fires them again */
    pthread_mutex_unlock(&alerts->mutex);
    if (alerts->backend->ops->claim != NULL && claim_saved(alerts)) {
        pthread_mutex_lock(&alerts->mutex);
        save_locked(alerts);
        pthread_mutex_unlock(&alerts->mutex);
        fired = true;
    }
    if (fired)
        alert_send_wake(alerts);
}

static void scan_tick(void *context)
{
    alerts_scan(context);
}

/* ---- Listing and stats. */

void alerts_encode_list(struct alerts *alerts, struct buffer *b, uint32_t limit)
{
    pthread_mutex_lock(&alerts->mutex);
    buffer_append_str(b, "{\"alerts\":[");
    uint32_t n = 0;
    for (uint32_t i = alerts->kept_count; i > 0 && n < limit; i--, n++) {
        if (n > 0)
            buffer_append_char(b, ',');
        encode_kept(b, &alerts->kept[i - 1]);
    }
    buffer_append_str(b, "]}");
    pthread_mutex_unlock(&alerts->mutex);
}

void alerts_stats(struct alerts *alerts, struct alerts_stats *out)
{
    pthread_mutex_lock(&alerts->mutex);
    *out = alerts->stats;
    out->pending = 0;
    for (uint32_t i = 0; i < alerts->kept_count; i++)
        out->pending += alerts->kept[i].delivery == ALERT_PENDING;
    pthread_mutex_unlock(&alerts->mutex);
}

/* ---- Life. */

static int read_secret(struct alerts *alerts, const char *file, char *error, size_t error_size)
{
    char *text = NULL;
    size_t length = 0;
    if (file_read_all(file, ALERT_SECRET_BYTES_MAX, &text, &length, error, error_size) != 0)
        return -1;
    while (length > 0 && (text[length - 1] == '\n' || text[length - 1] == '\r'))
        length--; /* a file written by echo ends with a newline that is not the secret's */
    if (length == 0) {
        free(text);
        snprintf(error, error_size, "%s: empty", file);
        return -1;
    }
    memcpy(alerts->secret, text, length);
    alerts->secret_length = length;
    alerts->signed_ = true;
    free(text);
    return 0;
}

/* This front end's name for claims: its host and data directory, the same
 * across its restarts and different for every other llmlimitd (one owns a
 * data directory). */
static void set_owner(struct alerts *alerts, const char *data_dir)
{
    char text[2 * PATH_MAX + 300] = "";
    char host[256] = "";
    char path[PATH_MAX];
    gethostname(host, sizeof host - 1);
    if (realpath(data_dir, path) == NULL)
        snprintf(path, sizeof path, "%s", data_dir);
    int n = snprintf(text, sizeof text, "llmlimitd alerts\n%s\n%s", host, path);
    uint8_t digest[SHA256_DIGEST_BYTES] = {0};
    if (n > 0 && sha256_digest(text, strnlen(text, sizeof text), digest) != 0)
        memset(digest, 0, sizeof digest);
    memcpy(alerts->owner, digest, sizeof alerts->owner);
}

static int set_paths(struct alerts *alerts, const char *data_dir, char *error, size_t error_size)
{
    int a = snprintf(alerts->dir, sizeof alerts->dir, "%s", data_dir);
    int b = snprintf(alerts->path, sizeof alerts->path, "%s/alerts.json", data_dir);
    int c = snprintf(alerts->tmp_path, sizeof alerts->tmp_path, "%s/alerts.json.tmp", data_dir);
    if (a < 0 || b < 0 || c < 0 || (size_t)c >= sizeof alerts->tmp_path) {
        snprintf(error, error_size, "%s: data directory path too long", data_dir);
        return -1;
    }
    return 0;
}

int alerts_open(const struct alerts_options *options, struct backend *backend,
                struct registry *registry, struct spend *spend, struct clock *clock,
                struct alerts **out, char *error, size_t error_size)
{
    if (options->webhook != NULL && !webhook_url_valid(options->webhook)) {
        snprintf(error, error_size,
                 "--alert-webhook: must be an http:// or https:// URL of at most 512 bytes");
        return -1;
    }
    struct alerts *alerts = calloc(1, sizeof *alerts);
    struct alert *kept = calloc(ALERTS_KEPT_MAX, sizeof *kept);
    if (alerts == NULL || kept == NULL) {
        free(alerts);
        free(kept);
        snprintf(error, error_size, "alerts: out of memory");
        return -1;
    }
    alerts->kept = kept;
    alerts->backend = backend;
    alerts->registry = registry;
    alerts->spend = spend;
    alerts->clock = clock;
    snprintf(alerts->webhook, sizeof alerts->webhook, "%s",
             options->webhook != NULL ? options->webhook : "");
    alerts->format = options->format;
    alerts->scan_ms = options->scan_ms;
    alerts->retry_ms = options->retry_ms;
    alerts->registry_generation = UINT64_MAX; /* read at the first scan */
    pthread_mutex_init(&alerts->mutex, NULL);
    set_owner(alerts, options->data_dir);
    if (set_paths(alerts, options->data_dir, error, error_size) != 0 ||
        (options->secret_file != NULL &&
         read_secret(alerts, options->secret_file, error, error_size) != 0) ||
        load_file(alerts, error, error_size) != 0) {
        alerts_close(alerts);
        return -1;
    }
    *out = alerts;
    return 0;
}

int alerts_start(struct alerts *alerts)
{
    if (alert_send_start(alerts) != 0)
        return -1;
    if (periodic_start(&alerts->scanner, alerts->scan_ms, scan_tick, alerts) != 0)
        return -1;
    alerts->scanner_started = true;
    return 0;
}

void alerts_stop(struct alerts *alerts)
{
    if (alerts == NULL)
        return;
    if (alerts->scanner_started)
        periodic_stop(&alerts->scanner);
    alerts->scanner_started = false;
    alert_send_stop(alerts);
    pthread_mutex_lock(&alerts->mutex);
    save_locked(alerts);
    pthread_mutex_unlock(&alerts->mutex);
}

void alerts_close(struct alerts *alerts)
{
    if (alerts == NULL)
        return;
    assert(!alerts->scanner_started);
    assert(!alerts->sender_started);
    explicit_bzero(alerts->secret, sizeof alerts->secret);
    pthread_mutex_destroy(&alerts->mutex);
    free(alerts->watched);
    free(alerts->kept);
    free(alerts);
}
