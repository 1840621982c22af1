/* The admin API (limits, test clock), usage, events, metrics and health.
 * None of them is on the hot path. Most answer at once on the worker that
 * received them; a limit's change runs on the offload thread, and the
 * usage of /metrics and /v1/usage is read by the backend, so that no
 * worker waits for a disk or a cluster (docs/architecture.md "Threads"). */
#include "exchange.h"
#include "services.h"
#include "handlers.h"
#include "gateway.h"
#include "control.h"
#include "keys_control.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/decode.h"
#include "wire/encode.h"
#include "util/log.h"
#include "wire/wire_text.h"

/* Latest instant a query may name: 9999-12-31T23:59:59.999Z. */
#define UNIX_MS_MAX INT64_C(253402300799999)

static int list_limits(struct exchange *ex)
{
    struct limit_state *states = NULL;
    size_t count = 0;
    if (backend_list_limits(ex->server->backend, &states, &count) != 0)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    assert(states != NULL || count == 0);
    assert(count <= LIMITS_COUNT_MAX);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"limits\":[");
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            buffer_append_char(&b, ',');
        encode_limit_state(&b, &states[i]);
    }
    buffer_append_str(&b, "]}");
    free(states);
    return exchange_answer(ex, 200, &b, 0);
}

/* A change that did not land in both the backend and limits.json
 * (docs/api.md, "Errors"): 503, and the error says which way it went. */
static int registry_failed(struct exchange *ex, int outcome)
{
    if (outcome == CONTROL_UNAVAILABLE) /* not in the store: nothing changed anywhere */
        return exchange_error(ex, 503, WIRE_CONTROL_UNAVAILABLE);
    switch ((enum registry_outcome)outcome) {
    case REGISTRY_WRITE_FAILED: /* undone: nothing changed */
        return exchange_error(ex, 503, WIRE_REGISTRY_WRITE_FAILED);
    case REGISTRY_UNSAVED: /* in force, the file catches up */
        return exchange_error(ex, 503, WIRE_REGISTRY_WRITE_FAILED_IN_FORCE);
    case REGISTRY_BACKEND_FAILED:
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    default:
        break;
    }
    assert(!"a failed registry outcome");
    return -1;
}

/* A limit's change, carried to the offload thread and back: the backend's
 * admin call and the fsync of limits.json block, the worker must not. */
struct limit_change {
    struct limit_definition definition; /* a put's; a delete's key only */
    struct limit_state state;           /* what a put left in force */
    int outcome;                        /* enum registry_outcome, or CONTROL_UNAVAILABLE */
    char error[DECODE_ERROR_SIZE];
};

/* The offload thread: the change lands in the backend and limits.json. */
static void put_work(struct exchange *ex)
{
    struct limit_change *change = ex->handler_state;
    if (ex->server->control != NULL) /* the store first, then here */
        change->outcome = control_put(ex->server->control, &change->definition, &change->state,
                                      change->error, sizeof change->error);
    else
        change->outcome = registry_put(ex->server->registry, &change->definition, &change->state,
                                       change->error, sizeof change->error);
}

/* Back on the worker, once limits.json holds the change (or it failed). */
static int put_reply(struct exchange *ex)
{
    const struct limit_change *change = ex->handler_state;
    const struct limit_definition *definition = &change->definition;
    const struct limit_state *state = &change->state;
    if (change->outcome == REGISTRY_REJECTED)
        return exchange_error(ex, 400, change->error);
    if (change->outcome != REGISTRY_OK)
        return registry_failed(ex, change->outcome);
    wait_limit_changed(ex->server->wait, definition->key); /* its waiters may fit now, or never */
    /* A decrease that waits leaves the old capacity in force. */
    assert(state->status == LIMIT_ACTIVE ||
           state->pending_decrease_to < state->definition.capacity);
    assert(state->status == LIMIT_DECREASING || state->pending_decrease_to == 0);
    char capacity[24], pending[24];
    snprintf(capacity, sizeof capacity, "%" PRIu64, state->definition.capacity);
    snprintf(pending, sizeof pending, "%" PRIu64, state->pending_decrease_to);
    log_write(LOG_INFO, "limit put", "key", definition->key, "kind",
              limit_kind_name(definition->kind), "capacity", capacity, "status",
              limit_status_name(state->status), "pending_decrease_to", pending, NULL);
    char storage[64];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    buffer_append_str(&b, "{\"ok\":true,\"status\":\"");
    buffer_append_str(&b, limit_status_name(state->status));
    buffer_append_str(&b, "\"}");
    return exchange_answer(ex, 200, &b, 0);
}

static int put_limit(struct exchange *ex)
{
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    struct limit_change *change = arena_alloc(&ex->arena, sizeof *change);
    if (change == NULL)
        return -1; /* out of memory */
    if (decode_definition(body, "", &change->definition, change->error, sizeof change->error) != 0)
        return exchange_error(ex, 400, change->error);
    ex->handler_state = change;
    return exchange_call_offload(ex, put_work, put_reply);
}

int handle_admin_limits(struct exchange *ex)
{
    return ex->method == HTTP_PUT ? put_limit(ex) : list_limits(ex);
}

/* The offload thread: limits.json without the key, then the backend. */
static void delete_work(struct exchange *ex)
{
    struct limit_change *change = ex->handler_state;
    if (ex->server->control != NULL)
        change->outcome = control_delete(ex->server->control, change->definition.key, change->error,
                                         sizeof change->error);
    else
        change->outcome = registry_delete(ex->server->registry, change->definition.key);
}

static int delete_reply(struct exchange *ex)
{
    const struct limit_change *change = ex->handler_state;
    const char *key = change->definition.key;
    if (change->outcome == REGISTRY_UNKNOWN)
        return exchange_unknown_key(ex, key);
    if (change->outcome != REGISTRY_OK)
        return registry_failed(ex, change->outcome);
    wait_limit_changed(ex->server->wait, key); /* its waiters: unknown_limit_key */
    log_write(LOG_INFO, "limit deleted", "key", key, NULL);
    char storage[16] = "{\"ok\":true}";
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    b.length = strlen(storage);
    return exchange_answer(ex, 200, &b, 0);
}

static int delete_limit(struct exchange *ex, const char *key)
{
    struct limit_change *change = arena_alloc(&ex->arena, sizeof *change);
    if (change == NULL)
        return -1; /* out of memory */
    snprintf(change->definition.key, sizeof change->definition.key, "%s", key);
    ex->handler_state = change;
    return exchange_call_offload(ex, delete_work, delete_reply);
}

int handle_admin_limit(struct exchange *ex)
{
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    if (exchange_path_key(ex, key, sizeof key) != 0)
        return 0;
    if (ex->method == HTTP_DELETE)
        return delete_limit(ex, key);
    struct limit_state state;
    if (backend_get_limit(ex->server->backend, key, &state) != 0)
        return exchange_unknown_key(ex, key);
    char storage[2048];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    buffer_append_str(&b, "{\"limit\":");
    encode_limit_state(&b, &state);
    buffer_append_char(&b, '}');
    return exchange_answer(ex, 200, &b, 0);
}

/* The test clock moves at most this far in one call (100 years). */
#define TEST_CLOCK_ADVANCE_MS_MAX (INT64_C(100) * 366 * 24 * 3600 * 1000)

int handle_admin_clock(struct exchange *ex)
{
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    if (!jdoc_is(body, JDOC_OBJECT))
        return exchange_error(ex, 400, WIRE_BODY_NOT_OBJECT);
    const struct jdoc_value *advance = NULL;
    for (uint32_t i = 0; i < body->count; i++) {
        const char *name = body->as.members[i].key;
        if (strcmp(name, "advance_ms") != 0) {
            char error[DECODE_ERROR_SIZE];
            snprintf(error, sizeof error, "%.200s: unknown field", name);
            return exchange_error(ex, 400, error);
        }
        advance = &body->as.members[i].value;
    }
    int64_t delta = jdoc_is(advance, JDOC_INTEGER) ? advance->as.integer : 0;
    if (!jdoc_is(advance, JDOC_INTEGER) || delta > TEST_CLOCK_ADVANCE_MS_MAX ||
        delta < -TEST_CLOCK_ADVANCE_MS_MAX)
        return exchange_error(ex, 400, WIRE_ADVANCE_MS_INVALID);
    assert(ex->server->config.test_clock); /* the route exists only then */
    int64_t offset = clock_offset_advance(&ex->server->test_clock, delta);
    wait_kick(ex->server->wait); /* waits whose deadline or wake time has come */
    char offset_text[24];
    snprintf(offset_text, sizeof offset_text, "%" PRId64, offset);
    log_write(LOG_INFO, "test clock moved", "offset_ms", offset_text, NULL);
    char storage[128];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    buffer_append_str(&b, "{\"ok\":true,\"offset_ms\":");
    buffer_append_i64(&b, offset);
    buffer_append_str(&b, ",\"now_unix_ms\":");
    buffer_append_i64(&b, clock_now_ms(ex->server->clock));
    buffer_append_char(&b, '}');
    return exchange_answer(ex, 200, &b, 0);
}

static int usage_by_caller(struct exchange *ex, const char *key, int64_t at)
{
    struct server *server = ex->server;
    if (server->backend->ops->usage_by_caller == NULL)
        return exchange_error(ex, 404, WIRE_NOT_SUPPORTED_BY_BACKEND);
    struct caller_usage *callers = NULL;
    size_t count = 0;
    enum backend_admin_result found =
        server->backend->ops->usage_by_caller(server->backend, key, at, &callers, &count);
    if (found == BACKEND_ADMIN_UNKNOWN_KEY)
        return exchange_unknown_key(ex, key);
    if (found != 0)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    assert(callers != NULL || count == 0);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"key\":");
    buffer_append_json_string(&b, key, strlen(key));
    buffer_append_str(&b, ",\"at_unix_ms\":");
    buffer_append_i64(&b, at);
    buffer_append_str(&b, ",\"callers\":[");
    for (size_t i = 0; i < count; i++) {
        buffer_append_str(&b, i > 0 ? ",{\"caller\":" : "{\"caller\":");
        buffer_append_json_string(&b, callers[i].caller, strlen(callers[i].caller));
        buffer_append_str(&b, ",\"reserved\":");
        buffer_append_u64(&b, callers[i].reserved);
        buffer_append_str(&b, ",\"used\":");
        buffer_append_u64(&b, callers[i].used);
        buffer_append_str(&b, ",\"debt\":");
        buffer_append_u64(&b, callers[i].debt);
        buffer_append_str(&b, ",\"spent\":"); /* what the caller cost, overrun included */
        buffer_append_u64(&b, amount_add_saturating(callers[i].used, callers[i].debt));
        buffer_append_str(&b, ",\"calls\":");
        buffer_append_u64(&b, callers[i].calls);
        buffer_append_char(&b, '}');
    }
    buffer_append_str(&b, "]}");
    free(callers);
    return exchange_answer(ex, 200, &b, 0);
}

/* One limit's usage, read by the backend (a cluster round trip, or the
 * sqlite writer) while the worker answers others. */
struct usage_read {
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    struct usage_request request;
    struct usage_result result;
};

static void usage_start(struct exchange *ex)
{
    struct usage_read *read = ex->handler_state;
    backend_usage_batch(ex->server->backend, &read->request, &read->result, 1,
                        exchange_backend_done, ex);
}

static int usage_reply(struct exchange *ex)
{
    const struct usage_read *read = ex->handler_state;
    if (read->result.result == BACKEND_ADMIN_UNKNOWN_KEY)
        return exchange_unknown_key(ex, read->key);
    if (read->result.result != BACKEND_ADMIN_OK)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    char storage[1024];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    encode_usage(&b, &read->result.usage);
    return exchange_answer(ex, 200, &b, 0);
}

int handle_usage(struct exchange *ex)
{
    char key[LIMIT_KEY_LENGTH_MAX + 1];
    if (exchange_path_key(ex, key, sizeof key) != 0)
        return 0;
    int64_t at = clock_now_ms(ex->server->clock);
    if (exchange_query_i64(ex, "at_unix_ms", 0, UNIX_MS_MAX, &at) < 0)
        return 0;
    char group_by[16];
    int grouped = exchange_query(ex, "group_by", group_by, sizeof group_by);
    if (grouped < 0)
        return 0;
    if (grouped > 0 && strcmp(group_by, "caller") != 0)
        return exchange_error(ex, 400, WIRE_GROUP_BY_INVALID);
    if (grouped > 0)
        return usage_by_caller(ex, key, at);
    struct usage_read *read = arena_alloc(&ex->arena, sizeof *read);
    if (read == NULL)
        return -1; /* out of memory */
    snprintf(read->key, sizeof read->key, "%s", key);
    read->request = (struct usage_request){read->key, at};
    ex->handler_state = read;
    return exchange_call_backend(ex, usage_start, usage_reply);
}

static void encode_event(struct buffer *b, const struct backend_event *e)
{
    buffer_append_str(b, "{\"id\":");
    buffer_append_i64(b, e->id);
    buffer_append_str(b, ",\"at_unix_ms\":");
    buffer_append_i64(b, e->at_unix_ms);
    const char *names[] = {"type", "lease_id", "key", "caller"};
    const char *values[] = {e->type, e->lease_id, e->key, e->caller};
    size_t sizes[] = {sizeof e->type, sizeof e->lease_id, sizeof e->key, sizeof e->caller};
    for (size_t i = 0; i < 4; i++) {
        buffer_printf(b, ",\"%s\":", names[i]);
        buffer_append_json_string(b, values[i], strnlen(values[i], sizes[i]));
    }
    buffer_append_str(b, ",\"amount\":");
    buffer_append_u64(b, e->amount);
    buffer_append_str(b, ",\"actual_amount\":");
    buffer_append_u64(b, e->actual_amount);
    buffer_append_str(b, ",\"detail\":");
    buffer_append_json_string(b, e->detail, strnlen(e->detail, sizeof e->detail));
    if (e->mcp_server[0] != '\0') { /* a gateway tool call's lease (docs/mcp.md) */
        buffer_append_str(b, ",\"mcp_server\":");
        buffer_append_json_string(b, e->mcp_server, strnlen(e->mcp_server, sizeof e->mcp_server));
        buffer_append_str(b, ",\"tool\":");
        buffer_append_json_string(b, e->tool, strnlen(e->tool, sizeof e->tool));
    }
    buffer_append_char(b, '}');
}

/* key and lease_id filters of GET /v1/events; 0, or -1 after answering. */
static int events_filters(struct exchange *ex, char *key, char *lease_id, struct event_query *query)
{
    int found = exchange_query(ex, "key", key, LIMIT_KEY_LENGTH_MAX + 1);
    if (found < 0)
        return -1;
    if (found > 0 && !limit_key_valid(key, strlen(key))) {
        exchange_error(ex, 400, WIRE_KEY_INVALID);
        return -1;
    }
    query->key = found > 0 ? key : NULL;
    found = exchange_query(ex, "lease_id", lease_id, LEASE_ID_LENGTH_MAX + 1);
    if (found < 0)
        return -1;
    if (found > 0 && !lease_id_valid(lease_id, strlen(lease_id))) {
        exchange_error(ex, 400, WIRE_LEASE_ID_INVALID);
        return -1;
    }
    query->lease_id = found > 0 ? lease_id : NULL;
    return 0;
}

int handle_events(struct exchange *ex)
{
    struct server *server = ex->server;
    if (server->backend->ops->events == NULL)
        return exchange_error(ex, 404, WIRE_NOT_SUPPORTED_BY_BACKEND);
    char key[LIMIT_KEY_LENGTH_MAX + 1], lease_id[LEASE_ID_LENGTH_MAX + 1];
    struct event_query query = {.limit = EVENTS_PAGE_DEFAULT};
    int64_t since = 0, limit = EVENTS_PAGE_DEFAULT;
    if (events_filters(ex, key, lease_id, &query) != 0 ||
        exchange_query_i64(ex, "since", 0, INT64_MAX, &since) < 0 ||
        exchange_query_i64(ex, "limit", 1, EVENTS_PAGE_MAX, &limit) < 0)
        return 0;
    query.after_id = since;
    query.limit = (uint32_t)limit;
    struct backend_event *events = NULL;
    size_t count = 0;
    if (server->backend->ops->events(server->backend, &query, &events, &count) != 0)
        return exchange_error(ex, 503, WIRE_BACKEND_ERROR);
    assert(events != NULL || count == 0);
    assert(count <= query.limit);
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"events\":[");
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            buffer_append_char(&b, ',');
        /* A page is oldest first, after `since`: paging never repeats. */
        assert(events[i].id > (i > 0 ? events[i - 1].id : since));
        encode_event(&b, &events[i]);
    }
    buffer_append_str(&b, "],\"next_since\":");
    buffer_append_i64(&b, count > 0 ? events[count - 1].id : since);
    buffer_append_char(&b, '}');
    free(events);
    return exchange_answer(ex, 200, &b, 0);
}

/* GET /v1/alerts?limit=N: the newest alerts with their delivery state. */
int handle_alerts(struct exchange *ex)
{
    int64_t limit = ALERTS_LIST_DEFAULT;
    if (exchange_query_i64(ex, "limit", 1, ALERTS_KEPT_MAX, &limit) < 0)
        return 0;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    alerts_encode_list(ex->server->alerts, &b, (uint32_t)limit);
    return exchange_answer(ex, 200, &b, 0);
}

/* The usage is in: the whole text. */
static int metrics_reply(struct exchange *ex)
{
    struct server *server = ex->server;
    struct buffer b;
    buffer_init(&b, NULL, 0);
    metrics_render(server->metrics, ex->handler_state, server->backend, &b);
    struct wait_stats waits;
    wait_stats(server->wait, &waits);
    const struct metric_row wait_rows[] = {
        {"llmlimit_wait_waiting", "gauge", "Reserves waiting for capacity now.", waits.waiting},
        {"llmlimit_wait_limits", "gauge", "Limits with reserves waiting on them now.", waits.keys},
        {"llmlimit_wait_max_waiters", "gauge", "--max-waiters.", waits.max_waiters},
    };
    metrics_render_rows(&b, wait_rows, sizeof wait_rows / sizeof wait_rows[0]);
    struct alerts_stats alerts;
    alerts_stats(server->alerts, &alerts);
    const struct metric_row alert_rows[] = {
        {"llmlimit_alerts_fired_total", "counter", "Alerts fired since the start.", alerts.fired},
        {"llmlimit_alerts_sent_total", "counter", "Alerts delivered since the start.", alerts.sent},
        {"llmlimit_alerts_failed_total", "counter",
         "Alerts given up on since the start (not delivered within 24 h).", alerts.failed},
        {"llmlimit_alerts_pending", "gauge", "Alerts waiting for delivery now.", alerts.pending},
        {"llmlimit_alerts_dropped_total", "counter",
         "Alerts not kept: every kept alert was pending.", alerts.dropped},
    };
    metrics_render_rows(&b, alert_rows, sizeof alert_rows / sizeof alert_rows[0]);
    struct http_stats http;
    http_stats(server->http, &http);
    const struct metric_row rows[] = {
        {"llmlimit_http_connections_total", "counter", "Client connections accepted.",
         http.connections},
        {"llmlimit_http_requests_total", "counter", "Requests whose head was read whole.",
         http.requests},
        {"llmlimit_http_bad_requests_total", "counter",
         "Requests refused before routing: malformed heads or bodies, bodies over the limit.",
         http.bad_requests},
        {"llmlimit_http_closed_idle_total", "counter",
         "Connections closed for the idle or request deadline.", http.closed_idle},
        {"llmlimit_http_closed_stalled_total", "counter",
         "Connections closed because the client did not take its answer.", http.closed_stalled},
        {"llmlimit_http_wakes_taken_over_total", "counter",
         "Turns in which a worker thread answered the woken exchanges of a sleeping one.",
         http.wakes_taken_over},
    };
    metrics_render_rows(&b, rows, sizeof rows / sizeof rows[0]);
    if (server->gateway != NULL)
        gateway_metrics_render(server->gateway, &b);
    if (server->control != NULL)
        control_metrics_render(server->control, &b);
    if (server->keys_control != NULL)
        keys_control_metrics_render(server->keys_control, &b);
    return exchange_answer(ex, 200, &b, 0);
}

static void metrics_read(struct exchange *ex)
{
    metrics_scrape_read(ex->handler_state, ex->server->backend, exchange_backend_done, ex);
}

static void metrics_cleanup(struct exchange *ex)
{
    metrics_scrape_free(ex->handler_state);
}

/* The limits' usage is read without holding the worker (a cluster may take
 * its deadline to answer); the rest is counted here. */
int handle_metrics(struct exchange *ex)
{
    struct server *server = ex->server;
    struct metrics_scrape *scrape =
        metrics_scrape_new(server->backend, clock_now_ms(server->clock));
    if (scrape == NULL)
        return -1; /* out of memory */
    ex->handler_state = scrape;
    ex->cleanup = metrics_cleanup;
    return exchange_call_backend(ex, metrics_read, metrics_reply);
}

static int answer_text(struct exchange *ex, unsigned status, const char *text)
{
    char storage[64];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    buffer_append_str(&b, text);
    return exchange_answer(ex, status, &b, 0);
}

int handle_healthz(struct exchange *ex)
{
    return answer_text(ex, 200, "{\"ok\":true}");
}

/* The bare address, tried by a person or probed by a tool (HEAD /): what
 * answers, and where its page is. */
int handle_root(struct exchange *ex)
{
    return answer_text(ex, 200, "{\"service\":\"llmlimitd\",\"console\":\"/console\"}");
}

int handle_readyz(struct exchange *ex)
{
    struct server *server = ex->server;
    if (server->ready && backend_ready(server->backend))
        return answer_text(ex, 200, "{\"ok\":true}");
    return answer_text(ex, 503, "{\"ok\":false,\"error\":\"not_ready\"}");
}
