/* Decoding of limit definitions (PUT /v1/admin/limits) and LimitStates
 * (limits.json): strict types, unknown fields rejected, then the shared
 * validation of src/core/limits.c. */
#include "decode.h"
#include "decode_internal.h"
#include "wire_text.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int decode_fail(char *error, size_t error_size, const char *path, const char *field,
                const char *reason)
{
    assert(error_size > 0);
    assert(path != NULL);
    snprintf(error, error_size, "%s%s%s: %s", path, path[0] != '\0' ? "." : "", field, reason);
    return -1;
}

int decode_failf(char *error, size_t error_size, const char *path, const char *reason,
                 const char *field_format, ...)
{
    char field[96];
    va_list ap;
    va_start(ap, field_format);
    vsnprintf(field, sizeof field, field_format, ap);
    va_end(ap);
    return decode_fail(error, error_size, path, field, reason);
}

/* A string without NUL bytes of at most `max` bytes, copied into out[max + 1]. */
static bool copy_text(const struct jdoc_value *value, char *out, size_t max)
{
    assert(max >= 1);
    if (!jdoc_is(value, JDOC_STRING) || value->count > max)
        return false;
    memcpy(out, value->as.string, (size_t)value->count + 1);
    assert(out[value->count] == '\0'); /* the parser NUL-terminates strings */
    return true;
}

static bool integer_in(const struct jdoc_value *value, uint64_t min, uint64_t max, uint64_t *out)
{
    assert(min <= max);
    if (!jdoc_is(value, JDOC_INTEGER))
        return false;
    int64_t v = value->as.integer;
    if (v < 0 || (uint64_t)v < min || (uint64_t)v > max)
        return false;
    *out = (uint64_t)v;
    return true;
}

/* One item of "alerts": exactly one of at_percent, runout_before_period_end. */
static int alert_decode(const struct jdoc_value *item, uint32_t index, const char *path,
                        struct limit_alert *out, char *error, size_t error_size)
{
    if (!jdoc_is(item, JDOC_OBJECT) || item->count != 1)
        return decode_failf(error, error_size, path,
                            "must be {\"at_percent\":N} or {\"runout_before_period_end\":true}",
                            "alerts[%u]", index);
    const struct jdoc_member *m = &item->as.members[0];
    uint64_t percent;
    if (strcmp(m->key, "at_percent") == 0) {
        if (!integer_in(&m->value, ALERT_PERCENT_MIN, ALERT_PERCENT_MAX, &percent))
            return decode_failf(error, error_size, path, "must be an integer 1..1000",
                                "alerts[%u].at_percent", index);
        *out = (struct limit_alert){.at_percent = (uint16_t)percent};
    } else if (strcmp(m->key, "runout_before_period_end") == 0) {
        if (!jdoc_is(&m->value, JDOC_TRUE))
            return decode_failf(error, error_size, path, "must be true",
                                "alerts[%u].runout_before_period_end", index);
        *out = (struct limit_alert){.runout = true};
    } else {
        return decode_failf(error, error_size, path, "unknown field", "alerts[%u].%s", index,
                            m->key);
    }
    return 0;
}

static int alerts_decode(struct limit_definition *d, const struct jdoc_value *value,
                         const char *path, char *error, size_t error_size)
{
    if (jdoc_is(value, JDOC_NULL))
        return 0;
    if (!jdoc_is(value, JDOC_ARRAY))
        return decode_fail(error, error_size, path, "alerts", "must be an array");
    if (value->count > LIMIT_ALERTS_MAX)
        return decode_fail(error, error_size, path, "alerts", "at most 8 alerts");
    for (uint32_t i = 0; i < value->count; i++) {
        if (alert_decode(&value->as.items[i], i, path, &d->alerts[i], error, error_size) != 0)
            return -1;
        for (uint32_t j = 0; j < i; j++) {
            if (d->alerts[j].runout == d->alerts[i].runout &&
                d->alerts[j].at_percent == d->alerts[i].at_percent)
                return decode_failf(error, error_size, path, "duplicate threshold", "alerts[%u]",
                                    i);
        }
    }
    d->alert_count = (uint8_t)value->count;
    return 0;
}

/* "webhook": a URL, or {"url": URL, "format": "json"|"slack"}. */
static int webhook_decode(struct limit_definition *d, const struct jdoc_value *value,
                          const char *path, char *error, size_t error_size)
{
    static const char url_rule[] = "must be an http:// or https:// URL of at most 512 bytes";
    const struct jdoc_value *url = value;
    if (jdoc_is(value, JDOC_NULL))
        return 0;
    if (jdoc_is(value, JDOC_OBJECT)) {
        url = NULL;
        for (uint32_t i = 0; i < value->count; i++) {
            const struct jdoc_member *m = &value->as.members[i];
            char text[16];
            if (strcmp(m->key, "url") == 0) {
                url = &m->value;
            } else if (strcmp(m->key, "format") == 0) {
                if (!copy_text(&m->value, text, sizeof text - 1) ||
                    alert_format_parse(text, &d->webhook_format) != 0)
                    return decode_fail(error, error_size, path, "webhook.format",
                                       "must be json or slack");
            } else {
                return decode_failf(error, error_size, path, "unknown field", "webhook.%s", m->key);
            }
        }
        if (url == NULL)
            return decode_fail(error, error_size, path, "webhook.url", "required");
    }
    if (!copy_text(url, d->webhook, WEBHOOK_URL_LENGTH_MAX) || !webhook_url_valid(d->webhook))
        return decode_fail(error, error_size, path, url == value ? "webhook" : "webhook.url",
                           url_rule);
    return 0;
}

enum definition_seen {
    SEEN_KEY = 1,
    SEEN_KIND = 2,
    SEEN_CAPACITY = 4,
};

static int definition_text_field(struct limit_definition *d, const char *name,
                                 const struct jdoc_value *value, const char *path, char *error,
                                 size_t error_size)
{
    char text[16];
    bool known = strcmp(name, "period") == 0 || strcmp(name, "unit") == 0 ||
                 strcmp(name, "description") == 0 || strcmp(name, "overage") == 0 ||
                 strcmp(name, "time_zone") == 0;
    if (known && jdoc_is(value, JDOC_NULL))
        return 0; /* an optional field sent as null is absent */
    if (strcmp(name, "period") == 0) {
        if (!copy_text(value, text, sizeof text - 1) || limit_period_parse(text, &d->period) != 0)
            return decode_fail(error, error_size, path, name, "must be day, week, month or none");
    } else if (strcmp(name, "time_zone") == 0) {
        if (!copy_text(value, d->time_zone, TIME_ZONE_LENGTH_MAX))
            return decode_fail(error, error_size, path, name,
                               "must be a zone name of at most 64 bytes (e.g. Europe/Berlin)");
    } else if (strcmp(name, "unit") == 0) {
        if (!copy_text(value, d->unit, UNIT_LENGTH_MAX))
            return decode_fail(error, error_size, path, name,
                               "must be a string of at most 64 bytes");
    } else if (strcmp(name, "description") == 0) {
        if (!copy_text(value, d->description, DESCRIPTION_LENGTH_MAX))
            return decode_fail(error, error_size, path, name,
                               "must be a string of at most 1024 bytes");
    } else if (strcmp(name, "overage") == 0) {
        if (!copy_text(value, text, sizeof text - 1) || limit_overage_parse(text, &d->overage) != 0)
            return decode_fail(error, error_size, path, name, "must be deny or debt");
    } else {
        return decode_fail(error, error_size, path, name, "unknown field");
    }
    return 0;
}

static int definition_field(struct limit_definition *d, unsigned *seen, const char *name,
                            const struct jdoc_value *value, const char *path, bool key_given,
                            char *error, size_t error_size)
{
    char text[16];
    uint64_t number;
    if (strcmp(name, "key") == 0 && key_given) {
        return decode_fail(error, error_size, path, name, "not allowed: the template gives it");
    } else if (strcmp(name, "key") == 0) {
        if (!copy_text(value, d->key, LIMIT_KEY_LENGTH_MAX) ||
            !limit_key_valid(d->key, strlen(d->key)))
            return decode_fail(error, error_size, path, name, WIRE_KEY_SYNTAX);
        *seen |= SEEN_KEY;
    } else if (strcmp(name, "kind") == 0) {
        if (!copy_text(value, text, sizeof text - 1) || limit_kind_parse(text, &d->kind) != 0)
            return decode_fail(error, error_size, path, name,
                               "must be rolling, concurrency or budget");
        *seen |= SEEN_KIND;
    } else if (strcmp(name, "capacity") == 0) {
        if (!integer_in(value, 1, AMOUNT_MAX, &d->capacity))
            return decode_fail(error, error_size, path, name,
                               "must be an integer 1..9223372036854775807");
        *seen |= SEEN_CAPACITY;
    } else if (strcmp(name, "window_seconds") == 0 || strcmp(name, "timeout_seconds") == 0) {
        if (jdoc_is(value, JDOC_NULL))
            return 0;
        if (!integer_in(value, 0, WINDOW_SECONDS_MAX, &number))
            return decode_fail(error, error_size, path, name, "must be an integer 0..31622400");
        if (name[0] == 'w')
            d->window_seconds = (uint32_t)number;
        else
            d->timeout_seconds = (uint32_t)number;
    } else if (strcmp(name, "period_anchor_day") == 0) {
        if (jdoc_is(value, JDOC_NULL))
            return 0;
        if (!integer_in(value, 0, PERIOD_ANCHOR_DAY_MAX, &number))
            return decode_fail(error, error_size, path, name, "must be an integer 1..28");
        d->period_anchor_day = (uint8_t)number;
    } else if (strcmp(name, "alerts") == 0) {
        return alerts_decode(d, value, path, error, error_size);
    } else if (strcmp(name, "webhook") == 0) {
        return webhook_decode(d, value, path, error, error_size);
    } else {
        return definition_text_field(d, name, value, path, error, error_size);
    }
    return 0;
}

/* key: NULL when the object gives it, else the key (valid) it takes. */
static int definition_decode(const struct jdoc_value *object, const char *path, const char *key,
                             struct limit_definition *out, char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT)) {
        snprintf(error, error_size, "%s: must be a JSON object", path[0] != '\0' ? path : "body");
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->overage = OVERAGE_DEBT;
    unsigned seen = 0;
    if (key != NULL) {
        assert(limit_key_valid(key, strlen(key)));
        memcpy(out->key, key, strlen(key) + 1);
        seen |= SEEN_KEY;
    }
    for (uint32_t i = 0; i < object->count; i++) {
        const struct jdoc_member *m = &object->as.members[i];
        if (definition_field(out, &seen, m->key, &m->value, path, key != NULL, error, error_size) !=
            0)
            return -1;
    }
    if ((seen & SEEN_KEY) == 0)
        return decode_fail(error, error_size, path, "key", "required");
    if ((seen & SEEN_KIND) == 0)
        return decode_fail(error, error_size, path, "kind", "required");
    if ((seen & SEEN_CAPACITY) == 0)
        return decode_fail(error, error_size, path, "capacity", "required");
    char reason[DECODE_ERROR_SIZE];
    if (limit_definition_validate(out, reason, sizeof reason) != 0) {
        snprintf(error, error_size, "%s%s%s", path, path[0] != '\0' ? "." : "", reason);
        return -1;
    }
    assert(out->capacity >= 1);
    assert(out->capacity <= AMOUNT_MAX);
    assert(out->key[0] != '\0');
    return 0;
}

int decode_definition(const struct jdoc_value *object, const char *path,
                      struct limit_definition *out, char *error, size_t error_size)
{
    return definition_decode(object, path, NULL, out, error, error_size);
}

int decode_definition_keyed(const struct jdoc_value *object, const char *path, const char *key,
                            struct limit_definition *out, char *error, size_t error_size)
{
    return definition_decode(object, path, key, out, error, error_size);
}

static int state_consistent(const struct limit_state *state, const char *path, char *error,
                            size_t error_size)
{
    if (state->status == LIMIT_ACTIVE && state->pending_decrease_to != 0)
        return decode_fail(error, error_size, path, "pending_decrease_to", "must be 0 when active");
    if (state->status == LIMIT_DECREASING &&
        (state->pending_decrease_to == 0 ||
         state->pending_decrease_to >= state->definition.capacity))
        return decode_fail(error, error_size, path, "pending_decrease_to",
                           "must be 1..capacity-1 when decreasing");
    if (state->status == LIMIT_DECREASING && state->definition.kind == LIMIT_BUDGET)
        return decode_fail(error, error_size, path, "status", "a budget is never decreasing");
    return 0;
}

int decode_limit_state(const struct jdoc_value *object, const char *path, struct limit_state *out,
                       char *error, size_t error_size)
{
    if (!jdoc_is(object, JDOC_OBJECT)) {
        snprintf(error, error_size, "%s: must be a JSON object", path);
        return -1;
    }
    memset(out, 0, sizeof *out);
    const struct jdoc_value *definition = NULL;
    char text[16];
    for (uint32_t i = 0; i < object->count; i++) {
        const char *name = object->as.members[i].key;
        const struct jdoc_value *value = &object->as.members[i].value;
        if (strcmp(name, "definition") == 0) {
            definition = value;
        } else if (strcmp(name, "status") == 0) {
            if (!copy_text(value, text, sizeof text - 1) ||
                limit_status_parse(text, &out->status) != 0)
                return decode_fail(error, error_size, path, name, "must be active or decreasing");
        } else if (strcmp(name, "pending_decrease_to") == 0) {
            if (!integer_in(value, 0, AMOUNT_MAX, &out->pending_decrease_to))
                return decode_fail(error, error_size, path, name,
                                   "must be an integer 0..9223372036854775807");
        } else {
            return decode_fail(error, error_size, path, name, "unknown field");
        }
    }
    if (definition == NULL)
        return decode_fail(error, error_size, path, "definition", "required");
    char definition_path[64];
    snprintf(definition_path, sizeof definition_path, "%s%sdefinition", path,
             path[0] != '\0' ? "." : "");
    if (decode_definition(definition, definition_path, &out->definition, error, error_size) != 0)
        return -1;
    return state_consistent(out, path, error, error_size);
}
