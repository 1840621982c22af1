/* One alert as a record (see alerts.h, docs/alerts.md): its id, its names,
 * its JSON (the webhook body, Slack's message, the fields GET /v1/alerts and
 * alerts.json show), and finding a kept one by id. Both the scanner
 * (alerts.c) and the sender (alert_send.c) use it; it calls neither. */
#include "alerts_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

static const char *const type_names[] = {"limit.threshold", "budget.runout"};
static const char *const delivery_names[] = {"pending", "sent", "failed", "none", "elsewhere"};
#define DELIVERY_COUNT 5

const char *alert_type_name(enum alert_type type)
{
    return type == ALERT_RUNOUT ? type_names[1] : type_names[0];
}

const char *alert_delivery_name(enum alert_delivery delivery)
{
    assert((unsigned)delivery < DELIVERY_COUNT);
    return delivery_names[delivery];
}

static int name_index(const char *const *names, int count, const char *name)
{
    for (int i = 0; i < count; i++) {
        if (strcmp(names[i], name) == 0)
            return i;
    }
    return -1;
}

int alert_type_parse(const char *name, enum alert_type *out)
{
    int i = name_index(type_names, 2, name);
    if (i < 0)
        return -1;
    *out = (enum alert_type)i;
    return 0;
}

int alert_delivery_parse(const char *name, enum alert_delivery *out)
{
    int i = name_index(delivery_names, DELIVERY_COUNT, name);
    if (i < 0)
        return -1;
    *out = (enum alert_delivery)i;
    return 0;
}

void alert_id(const char *key, const struct limit_alert *threshold, int64_t period_start_unix_ms,
              char out[ALERT_ID_HEX_LENGTH + 1])
{
    char text[LIMIT_KEY_LENGTH_MAX + 64];
    int n =
        threshold->runout
            ? snprintf(text, sizeof text, "%s\nrunout\n%lld", key, (long long)period_start_unix_ms)
            : snprintf(text, sizeof text, "%s\nat_percent:%u\n%lld", key,
                       (unsigned)threshold->at_percent, (long long)period_start_unix_ms);
    assert(n > 0 && (size_t)n < sizeof text);
    uint8_t digest[SHA256_DIGEST_BYTES];
    if (sha256_digest(text, (size_t)n, digest) != 0)
        memset(digest, 0, sizeof digest); /* libcrypto broken: every id alike, never twice */
    for (int i = 0; i < SHA256_DIGEST_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* ---- JSON of one alert: the webhook body, GET /v1/alerts, alerts.json. */

void alert_encode_fields(struct buffer *b, const struct alert *a)
{
    buffer_member_string(b, "id", a->id);
    buffer_append_char(b, ',');
    buffer_member_string(b, "type", alert_type_name(a->type));
    buffer_append_char(b, ',');
    buffer_member_string(b, "key", a->key);
    buffer_append_char(b, ',');
    buffer_member_string(b, "kind", limit_kind_name(a->kind));
    buffer_append_char(b, ',');
    buffer_append_str(b, "\"at_percent\":");
    if (a->type == ALERT_RUNOUT)
        buffer_append_str(b, "null");
    else
        buffer_append_u64(b, a->at_percent);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "used", a->used);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "debt", a->debt);
    buffer_append_char(b, ',');
    buffer_member_u64(b, "capacity", a->capacity);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_start_unix_ms", a->period_start_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "period_end_unix_ms", a->period_end_unix_ms);
    buffer_append_char(b, ',');
    buffer_member_i64(b, "at_unix_ms", a->at_unix_ms);
}

static void encode_slack(const struct alert *a, struct buffer *b)
{
    char text[LIMIT_KEY_LENGTH_MAX + 512];
    if (a->type == ALERT_RUNOUT)
        snprintf(text, sizeof text,
                 "llmlimit: budget %s runs out before its period ends at the current spend rate "
                 "(used %llu + debt %llu of %llu). Alert %s",
                 a->key, (unsigned long long)a->used, (unsigned long long)a->debt,
                 (unsigned long long)a->capacity, a->id);
    else
        snprintf(text, sizeof text,
                 "llmlimit: %s limit %s reached %u%% of its capacity (used %llu + debt %llu of "
                 "%llu). Alert %s",
                 limit_kind_name(a->kind), a->key, (unsigned)a->at_percent,
                 (unsigned long long)a->used, (unsigned long long)a->debt,
                 (unsigned long long)a->capacity, a->id);
    buffer_append_char(b, '{');
    buffer_member_string(b, "text", text);
    buffer_append_char(b, '}');
}

void alert_encode_body(const struct alert *alert, struct buffer *b)
{
    if (alert->format == ALERT_FORMAT_SLACK) {
        encode_slack(alert, b);
        return;
    }
    buffer_append_char(b, '{');
    alert_encode_fields(b, alert);
    buffer_append_char(b, '}');
}

struct alert *alerts_find_locked(struct alerts *alerts, const char *id)
{
    for (uint32_t i = 0; i < alerts->kept_count; i++) {
        if (memcmp(alerts->kept[i].id, id, ALERT_ID_HEX_LENGTH) == 0)
            return &alerts->kept[i];
    }
    return NULL;
}
