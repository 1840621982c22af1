/* The data path: reserve, complete, release and their batches. Each handler
 * parses and checks the body, makes one backend call, and writes the answer
 * straight into a buffer when the backend is done. */
#include "exchange.h"
#include "services.h"
#include "handlers.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "wire/decode.h"
#include "wire/encode.h"
#include "wire/reserve_scan.h"
#include "wire/wire_text.h"

/* Bytes of one batch result that answers an allowed reserve, to size the
 * batch answer in the arena up front (more only costs a move to the heap). */
#define BATCH_ITEM_REPLY_BYTES 192

/* A lease id in the gateway's namespace (LEASE_ID_GATEWAY_PREFIX): a
 * gateway call's lease is settled by the gateway alone, so a caller that
 * reads its lease id off its own answer can neither free its slot nor be
 * charged nothing, whatever token it holds (docs/api.md, "Lease ids"). */
#define GATEWAY_LEASE_REASON                                                                       \
    "belongs to a gateway call (it begins with \"" LEASE_ID_GATEWAY_PREFIX                         \
    "\"): only the gateway reserves, completes or releases it"
#define GATEWAY_LEASE_STATUS 403

/* What a batch item's decoder answers for a gateway lease (else -1 for
 * an invalid item, or the entries it took). */
#define BATCH_ITEM_REFUSED (-2)

/* Per-item state of a batch: either a backend call or an error answer. The
 * exchange's handler_state, in its arena with its arrays. */
struct batch {
    uint32_t item_count;
    uint32_t call_count;
    int32_t *call_of_item;    /* index into the call arrays, or -1 */
    uint32_t *error_of_item;  /* offset of the item's error in errors */
    uint16_t *status_of_item; /* of a failed item: 400, or 403 (a gateway lease) */
    struct buffer errors;     /* NUL-terminated error texts back to back */
    int64_t now_unix_ms;      /* reserves: when the answer was written (activity) */
    struct reserve_request *reserve_requests;
    struct reserve_result *reserve_results;
    struct requirement *requirements;
    struct complete_request *complete_requests;
    struct complete_result *complete_results;
    struct actual *actuals;
};

/* A single request's own while its backend call runs: the exchange's
 * handler_state, the first thing in its arena (written before it is read),
 * so it lies in the arena's inline storage. */
struct reserve_op {
    struct reserve_request request;
    struct reserve_result result;
    struct requirement requirements[REQUIREMENTS_PER_RESERVE_MAX];
    int64_t wait_ms; /* 0: answered at once */
    uint8_t priority;
    struct wait_ticket ticket; /* the wait layer's, while it waits */
};

struct complete_op {
    struct complete_request request;
    struct complete_result result;
    struct actual actuals[REQUIREMENTS_PER_RESERVE_MAX];
};

struct release_op {
    struct release_request request;
    struct release_result result;
};

/* A parsed single reserve needs no heap block: its state leaves room for
 * its document in the arena's inline storage. */
_Static_assert(sizeof(struct reserve_op) + 4096 <= EXCHANGE_ARENA_INLINE,
               "a single reserve's state and its document fit the exchange's arena");
_Static_assert(sizeof(struct complete_op) <= sizeof(struct reserve_op),
               "a single complete's state is no larger than a reserve's");

/* The handler's state of size bytes, in the arena; NULL (503 answered)
 * when out of memory, which a fresh arena's inline storage never is. */
static void *op_new(struct exchange *ex, size_t size)
{
    assert(ex->handler_state == NULL);
    ex->handler_state = arena_alloc_uninit(&ex->arena, size);
    if (ex->handler_state == NULL)
        exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    return ex->handler_state;
}

static struct reserve_op *reserve_op(struct exchange *ex)
{
    return ex->handler_state;
}

static struct complete_op *complete_op(struct exchange *ex)
{
    return ex->handler_state;
}

static struct release_op *release_op(struct exchange *ex)
{
    return ex->handler_state;
}

/* A batch's handler_state (NULL until batch_begin or batch_of_scanned). */
static struct batch *batch_of(struct exchange *ex)
{
    return ex->handler_state;
}

static void count_denials(struct exchange *ex, const struct reserve_request *request,
                          const struct reserve_result *result)
{
    if (result->error != BACKEND_OK || result->allowed)
        return;
    /* The backend names each denied requirement once. */
    assert(result->denied_count <= request->requirement_count);
    for (uint32_t i = 0; i < result->denied_count && i < REQUIREMENTS_PER_RESERVE_MAX; i++) {
        uint32_t index = result->denied_index[i];
        assert(index < request->requirement_count);
        if (index < request->requirement_count)
            metrics_denial(ex->server->metrics, request->requirements[index].key,
                           request->requirements[index].key_length);
    }
}

/* 403 for a lease of the gateway's; 0 (nothing answered) for any other. */
static int refuse_gateway_lease(struct exchange *ex, const char *lease_id, uint32_t length)
{
    if (!lease_id_is_gateway(lease_id, length))
        return 0;
    exchange_error(ex, GATEWAY_LEASE_STATUS, "lease_id: " GATEWAY_LEASE_REASON);
    return -1;
}

/* A batch item's error for a lease of the gateway's. */
static int batch_item_gateway_lease(const char *path, char *error, size_t error_size)
{
    snprintf(error, error_size, "%s%slease_id: %s", path, path[0] != '\0' ? "." : "",
             GATEWAY_LEASE_REASON);
    return BATCH_ITEM_REFUSED;
}

static void free_warnings(struct complete_result *results, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        free(results[i].warnings);
        results[i].warnings = NULL;
    }
}

static void complete_cleanup(struct exchange *ex)
{
    if (ex->called)
        free_warnings(&complete_op(ex)->result, 1);
}

static void batch_cleanup(struct exchange *ex)
{
    struct batch *batch = batch_of(ex);
    if (batch == NULL)
        return;
    /* The batch and its arrays are in the arena; only what the backend and
     * the error buffer allocated is freed here. */
    if (batch->complete_results != NULL && ex->called)
        free_warnings(batch->complete_results, batch->call_count);
    buffer_free(&batch->errors);
    ex->handler_state = NULL;
}

/* ---- single requests ---------------------------------------------------- */

/* The client of a waiting reserve left: it leaves the queue at once, and
 * nothing stays held; its answer (cancelled) goes nowhere. */
static void reserve_gone(struct http_exchange *hx)
{
    struct exchange *ex = (struct exchange *)hx;
    wait_cancel(ex->server->wait, &reserve_op(ex)->ticket);
}

/* Every single reserve goes through the waiting queue (src/wait): one that
 * asks no wait costs a plain backend reserve unless others wait on its
 * limits, and then it does not overtake them (docs/semantics.md). */
static void reserve_call(struct exchange *ex)
{
    struct reserve_op *op = reserve_op(ex);
    reserve_result_clear(&op->result);
    if (op->wait_ms > 0)
        ex->http.on_gone = reserve_gone;
    wait_reserve(ex->server->wait, &op->ticket, &op->request, &op->result, op->wait_ms,
                 op->priority, exchange_backend_done, ex);
}

static int reserve_reply(struct exchange *ex)
{
    const struct reserve_op *op = reserve_op(ex);
    const struct reserve_request *request = &op->request;
    const struct reserve_result *result = &op->result;
    struct buffer b;
    exchange_reply_buffer(ex, &b);
    buffer_append_char(&b, '{');
    unsigned status = encode_reserve_members(&b, request, result);
    bool waits = op->wait_ms > 0;
    if (waits) { /* a reserve that asked to wait says how long it did */
        buffer_append_char(&b, ',');
        buffer_member_i64(&b, "waited_ms", result->waited_ms);
        metrics_wait(ex->server->metrics, result->wait_outcome, result->waited_ms);
    }
    buffer_append_char(&b, '}');
    count_denials(ex, request, result);
    activity_reserve(ex->server->activity, clock_now_ms(ex->server->clock), ACTIVITY_SOURCE_API,
                     request, result);
    bool denied = status == 200 && !result->allowed;
    bool full = result->wait_outcome == RESERVE_WAIT_FULL;
    return exchange_answer_with(ex, status, &b, denied ? result->retry_after_ms : 0,
                                full ? "x-llmlimit-queue" : NULL, full ? "full" : NULL);
}

int handle_reserve(struct exchange *ex)
{
    struct reserve_op *op = op_new(ex, sizeof *op);
    if (op == NULL)
        return 0;
    struct reserve_wait wait;
    if (reserve_scan_one(ex->body, ex->body_length, &op->request, op->requirements, &wait) != 0) {
        const struct jdoc_value *body = exchange_parse_body(ex);
        if (body == NULL)
            return 0;
        char error[DECODE_ERROR_SIZE];
        if (decode_reserve_wait(body, "", &op->request, op->requirements, &wait, error,
                                sizeof error) != 0)
            return exchange_error(ex, 400, error);
    }
    if (refuse_gateway_lease(ex, op->request.lease_id, op->request.lease_id_length) != 0)
        return 0;
    op->wait_ms = wait.wait_ms;
    op->priority = wait.priority;
    return exchange_call_backend(ex, reserve_call, reserve_reply);
}

static void complete_call(struct exchange *ex)
{
    struct complete_op *op = complete_op(ex);
    memset(&op->result, 0, sizeof op->result);
    wait_complete(ex->server->wait, &op->request, &op->result, 1, exchange_backend_done, ex);
}

static int complete_reply(struct exchange *ex)
{
    const struct complete_op *op = complete_op(ex);
    struct buffer b;
    exchange_reply_buffer(ex, &b);
    buffer_append_char(&b, '{');
    unsigned status = encode_complete_members(&b, &op->request, &op->result);
    buffer_append_char(&b, '}');
    return exchange_answer(ex, status, &b, 0);
}

int handle_complete(struct exchange *ex)
{
    struct complete_op *op = op_new(ex, sizeof *op);
    if (op == NULL)
        return 0;
    ex->cleanup = complete_cleanup;
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    char error[DECODE_ERROR_SIZE];
    if (decode_complete(body, "", &op->request, op->actuals, error, sizeof error) != 0)
        return exchange_error(ex, 400, error);
    if (refuse_gateway_lease(ex, op->request.lease_id, op->request.lease_id_length) != 0)
        return 0;
    return exchange_call_backend(ex, complete_call, complete_reply);
}

static void release_call(struct exchange *ex)
{
    struct release_op *op = release_op(ex);
    memset(&op->result, 0, sizeof op->result);
    wait_release(ex->server->wait, &op->request, &op->result, 1, exchange_backend_done, ex);
}

static int release_reply(struct exchange *ex)
{
    struct buffer b;
    exchange_reply_buffer(ex, &b);
    buffer_append_char(&b, '{');
    unsigned status = encode_release_members(&b, &release_op(ex)->result);
    buffer_append_char(&b, '}');
    return exchange_answer(ex, status, &b, 0);
}

int handle_release(struct exchange *ex)
{
    struct release_op *op = op_new(ex, sizeof *op);
    if (op == NULL)
        return 0;
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return 0;
    char error[DECODE_ERROR_SIZE];
    if (decode_release(body, "", &op->request, error, sizeof error) != 0)
        return exchange_error(ex, 400, error);
    if (refuse_gateway_lease(ex, op->request.lease_id, op->request.lease_id_length) != 0)
        return 0;
    return exchange_call_backend(ex, release_call, release_reply);
}

/* ---- batches ------------------------------------------------------------ */

/* Entries of the list field `field` over every object item: the batch-wide
 * bound (BATCH_REQUIREMENTS_MAX) and the size of the shared entry array. */
static size_t batch_entries(const struct jdoc_value *requests, const char *field)
{
    size_t total = 0;
    for (uint32_t i = 0; i < requests->count; i++) {
        const struct jdoc_value *list = jdoc_get(&requests->as.items[i], field);
        if (jdoc_is(list, JDOC_ARRAY))
            total += list->count;
    }
    return total;
}

/* The batch and its arrays, in the exchange's arena; NULL when out of memory.
 * The per-item arrays are written before they are read (results are reset
 * before the call), so they are not zero-filled: at a few hundred bytes per
 * result that was a good part of a batch reserve. */
static struct batch *batch_new(struct arena *arena, size_t items, size_t entries, bool reserve)
{
    assert(items <= BATCH_ITEMS_MAX);
    assert(entries <= BATCH_REQUIREMENTS_MAX);
    struct batch *batch = arena_alloc(arena, sizeof *batch);
    if (batch == NULL)
        return NULL;
    batch->item_count = (uint32_t)items;
    buffer_init(&batch->errors, NULL, 0);
    batch->call_of_item = arena_alloc_uninit(arena, items * sizeof *batch->call_of_item);
    batch->error_of_item = arena_alloc_uninit(arena, items * sizeof *batch->error_of_item);
    batch->status_of_item = arena_alloc_uninit(arena, items * sizeof *batch->status_of_item);
    bool ok = batch->call_of_item != NULL && batch->error_of_item != NULL &&
              batch->status_of_item != NULL;
    if (reserve) {
        batch->reserve_requests =
            arena_alloc_uninit(arena, items * sizeof *batch->reserve_requests);
        batch->reserve_results = arena_alloc_uninit(arena, items * sizeof *batch->reserve_results);
        batch->requirements = arena_alloc_uninit(arena, entries * sizeof *batch->requirements);
        ok = ok && batch->reserve_requests != NULL && batch->reserve_results != NULL &&
             batch->requirements != NULL;
    } else {
        batch->complete_requests = arena_alloc(arena, items * sizeof *batch->complete_requests);
        batch->complete_results = arena_alloc(arena, items * sizeof *batch->complete_results);
        batch->actuals = arena_alloc(arena, entries * sizeof *batch->actuals);
        ok = ok && batch->complete_requests != NULL && batch->complete_results != NULL &&
             batch->actuals != NULL;
    }
    return ok ? batch : NULL;
}

/* "requests[i]" into the first half of error. Item paths are written only
 * for a failed item (the decoders run again with it): formatting one per
 * item cost more than decoding the item. */
static void item_path(size_t item, char *error, size_t error_size)
{
    snprintf(error, error_size / 2, "requests[%zu]", item);
}

static void batch_item_failed(struct batch *batch, size_t item, uint16_t status, const char *error)
{
    assert(item < batch->item_count);
    assert(error[0] != '\0'); /* a failed item always says why */
    assert(status == 400 || status == GATEWAY_LEASE_STATUS);
    batch->call_of_item[item] = -1;
    batch->status_of_item[item] = status;
    batch->error_of_item[item] = (uint32_t)batch->errors.length;
    buffer_append(&batch->errors, error, strlen(error) + 1);
}

/* Parses the body and checks the batch-wide bounds; NULL after answering. */
static struct batch *batch_begin(struct exchange *ex, const char *list_field, bool reserve,
                                 const struct jdoc_value **requests)
{
    const struct jdoc_value *body = exchange_parse_body(ex);
    if (body == NULL)
        return NULL;
    char error[DECODE_ERROR_SIZE];
    if (decode_batch(body, requests, error, sizeof error) != 0) {
        exchange_error(ex, 400, error);
        return NULL;
    }
    size_t entries = batch_entries(*requests, list_field);
    if (entries > BATCH_REQUIREMENTS_MAX) {
        snprintf(error, sizeof error, "requests: at most %d %s in all", BATCH_REQUIREMENTS_MAX,
                 list_field);
        exchange_error(ex, 400, error);
        return NULL;
    }
    struct batch *batch = batch_new(&ex->arena, (*requests)->count, entries, reserve);
    ex->handler_state = batch;
    if (batch == NULL)
        exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
    return batch;
}

/* Decodes one batch item into call slot batch->call_count, its entries from
 * `offset` on; the number of entries it took, or -1 (invalid) or
 * BATCH_ITEM_REFUSED (a gateway lease) with the error written. */
typedef int (*batch_decode_fn)(struct batch *batch, const struct jdoc_value *item, const char *path,
                               size_t offset, char *error, size_t error_size);

/* Decodes every item: a good one takes the next call slot, a failed one keeps
 * its error (decoded again with its path) for the reply; then makes the one
 * backend call, or answers at once when no item was good. */
static int batch_decode_and_call(struct exchange *ex, const struct jdoc_value *requests,
                                 batch_decode_fn decode, void (*call)(struct exchange *),
                                 int (*reply)(struct exchange *))
{
    struct batch *batch = batch_of(ex);
    size_t offset = 0;
    for (size_t i = 0; i < batch->item_count; i++) {
        char error[DECODE_ERROR_SIZE];
        int taken = decode(batch, &requests->as.items[i], "", offset, error, sizeof error);
        if (taken < 0) {
            uint16_t status = taken == BATCH_ITEM_REFUSED ? GATEWAY_LEASE_STATUS : 400;
            item_path(i, error, sizeof error);
            decode(batch, &requests->as.items[i], error, offset, error + sizeof error / 2,
                   sizeof error / 2);
            batch_item_failed(batch, i, status, error + sizeof error / 2);
            continue;
        }
        offset += (size_t)taken;
        batch->call_of_item[i] = (int32_t)batch->call_count++;
    }
    /* batch_begin counted the entries the decoders may take. */
    assert(offset <= BATCH_REQUIREMENTS_MAX);
    assert(batch->call_count <= batch->item_count);
    if (batch->call_count == 0)
        return reply(ex);
    return exchange_call_backend(ex, call, reply);
}

/* {"results":[ ... ]} with one member writer per kind of batch. */
static int batch_reply(struct exchange *ex,
                       unsigned (*item)(struct exchange *, struct buffer *, uint32_t))
{
    struct batch *batch = batch_of(ex);
    assert(batch->call_count <= batch->item_count);
    size_t estimate = 64 + (size_t)batch->item_count * BATCH_ITEM_REPLY_BYTES;
    char *storage = arena_alloc_uninit(&ex->arena, estimate);
    struct buffer b;
    buffer_init(&b, storage, storage != NULL ? estimate : 0);
    b.stable = true; /* the arena lives until the request completes */
    buffer_append_str(&b, "{\"results\":[");
    for (uint32_t i = 0; i < batch->item_count; i++) {
        if (i > 0)
            buffer_append_char(&b, ',');
        if (batch->call_of_item[i] < 0) {
            buffer_append_str(&b, "{\"status\":");
            buffer_append_u64(&b, batch->status_of_item[i]);
            buffer_append_str(&b, ",\"error\":");
            const char *error = batch->errors.data + batch->error_of_item[i];
            buffer_append_json_string(&b, error, strlen(error));
        } else {
            assert((uint32_t)batch->call_of_item[i] < batch->call_count);
            item(ex, &b, (uint32_t)batch->call_of_item[i]);
        }
        buffer_append_char(&b, '}');
    }
    buffer_append_str(&b, "]}");
    if (batch->errors.failed)
        b.failed = true;
    return exchange_answer(ex, 200, &b, 0);
}

static unsigned reserve_item(struct exchange *ex, struct buffer *b, uint32_t call)
{
    const struct batch *batch = batch_of(ex);
    const struct reserve_request *request = &batch->reserve_requests[call];
    const struct reserve_result *result = &batch->reserve_results[call];
    unsigned status = encode_http_status(result->error);
    if (status == 200 && !result->allowed)
        activity_denial(ex->server->activity, batch->now_unix_ms, ACTIVITY_SOURCE_API, request,
                        result);
    if (status == 200) {
        static const char head[] = "{\"status\":200,";
        buffer_append(b, head, sizeof head - 1);
    } else {
        buffer_append_str(b, "{\"status\":");
        buffer_append_u64(b, status);
        buffer_append_char(b, ',');
    }
    encode_reserve_members(b, request, result);
    count_denials(ex, request, result);
    return status;
}

/* The batch's reserves are counted at once: one atomic add, not one each. */
static void count_batch_activity(struct exchange *ex)
{
    struct batch *batch = batch_of(ex);
    uint64_t answered = 0, denied = 0;
    for (uint32_t i = 0; i < batch->call_count; i++) {
        const struct reserve_result *result = &batch->reserve_results[i];
        if (encode_http_status(result->error) != 200)
            continue; /* 409, 503: no answer about capacity */
        answered++;
        if (!result->allowed)
            denied++;
    }
    activity_count(ex->server->activity, batch->now_unix_ms, answered, denied);
}

static int reserve_batch_reply(struct exchange *ex)
{
    batch_of(ex)->now_unix_ms = clock_now_ms(ex->server->clock);
    count_batch_activity(ex);
    return batch_reply(ex, reserve_item);
}

static void reserve_batch_call(struct exchange *ex)
{
    struct batch *batch = batch_of(ex);
    for (uint32_t i = 0; i < batch->call_count; i++) {
        reserve_result_clear(&batch->reserve_results[i]);
        /* Batch items do not wait, nor overtake those who do. */
        batch->reserve_requests[i].yield_mask =
            wait_yield_mask(ex->server->wait, &batch->reserve_requests[i], WAIT_PRIORITY_DEFAULT);
    }
    backend_reserve(ex->server->backend, batch->reserve_requests, batch->reserve_results,
                    batch->call_count, exchange_backend_done, ex);
}

/* A batch whose every item scanned (reserve_scan_batch): one call each,
 * but for an item whose lease is the gateway's, refused (403). The scan
 * wrote into the body, so such a batch cannot be decoded again. */
static struct batch *batch_of_scanned(struct arena *arena, struct reserve_request *requests,
                                      uint32_t count)
{
    assert(count >= 1);
    assert(count <= BATCH_ITEMS_MAX);
    struct batch *batch = arena_alloc(arena, sizeof *batch);
    if (batch == NULL)
        return NULL;
    buffer_init(&batch->errors, NULL, 0);
    batch->item_count = count;
    batch->call_count = 0;
    batch->reserve_requests = requests;
    batch->call_of_item = arena_alloc_uninit(arena, count * sizeof *batch->call_of_item);
    batch->error_of_item = arena_alloc_uninit(arena, count * sizeof *batch->error_of_item);
    batch->status_of_item = arena_alloc_uninit(arena, count * sizeof *batch->status_of_item);
    batch->reserve_results = arena_alloc_uninit(arena, count * sizeof *batch->reserve_results);
    if (batch->call_of_item == NULL || batch->error_of_item == NULL ||
        batch->status_of_item == NULL || batch->reserve_results == NULL)
        return NULL;
    for (uint32_t i = 0; i < count; i++) {
        if (lease_id_is_gateway(requests[i].lease_id, requests[i].lease_id_length)) {
            char path[32], error[DECODE_ERROR_SIZE];
            snprintf(path, sizeof path, "requests[%" PRIu32 "]", i);
            batch_item_gateway_lease(path, error, sizeof error);
            batch_item_failed(batch, i, GATEWAY_LEASE_STATUS, error);
            continue;
        }
        requests[batch->call_count] = requests[i]; /* the calls, in order, at the front */
        batch->call_of_item[i] = (int32_t)batch->call_count++;
    }
    return batch;
}

static int reserve_item_decode(struct batch *batch, const struct jdoc_value *item, const char *path,
                               size_t offset, char *error, size_t error_size)
{
    struct reserve_request *request = &batch->reserve_requests[batch->call_count];
    if (decode_reserve(item, path, request, batch->requirements + offset, error, error_size) != 0)
        return -1;
    if (lease_id_is_gateway(request->lease_id, request->lease_id_length))
        return batch_item_gateway_lease(path, error, error_size);
    return (int)request->requirement_count;
}

int handle_reserve_batch(struct exchange *ex)
{
    ex->cleanup = batch_cleanup;
    struct reserve_request *scanned;
    uint32_t scanned_count;
    if (reserve_scan_batch(ex->body, ex->body_length, &ex->arena, &scanned, &scanned_count) == 0) {
        struct batch *batch = batch_of_scanned(&ex->arena, scanned, scanned_count);
        ex->handler_state = batch;
        if (batch == NULL)
            return exchange_error(ex, 503, WIRE_OUT_OF_MEMORY);
        if (batch->call_count == 0)
            return reserve_batch_reply(ex);
        return exchange_call_backend(ex, reserve_batch_call, reserve_batch_reply);
    }
    const struct jdoc_value *requests;
    if (batch_begin(ex, "requirements", true, &requests) == NULL)
        return 0;
    return batch_decode_and_call(ex, requests, reserve_item_decode, reserve_batch_call,
                                 reserve_batch_reply);
}

static unsigned complete_item(struct exchange *ex, struct buffer *b, uint32_t call)
{
    const struct batch *batch = batch_of(ex);
    const struct complete_request *request = &batch->complete_requests[call];
    const struct complete_result *result = &batch->complete_results[call];
    unsigned status = encode_http_status(result->error);
    buffer_append_str(b, "{\"status\":");
    buffer_append_u64(b, status);
    buffer_append_char(b, ',');
    encode_complete_members(b, request, result);
    return status;
}

static int complete_batch_reply(struct exchange *ex)
{
    return batch_reply(ex, complete_item);
}

static void complete_batch_call(struct exchange *ex)
{
    struct batch *batch = batch_of(ex);
    wait_complete(ex->server->wait, batch->complete_requests, batch->complete_results,
                  batch->call_count, exchange_backend_done, ex);
}

static int complete_item_decode(struct batch *batch, const struct jdoc_value *item,
                                const char *path, size_t offset, char *error, size_t error_size)
{
    struct complete_request *request = &batch->complete_requests[batch->call_count];
    if (decode_complete(item, path, request, batch->actuals + offset, error, error_size) != 0)
        return -1;
    if (lease_id_is_gateway(request->lease_id, request->lease_id_length))
        return batch_item_gateway_lease(path, error, error_size);
    return (int)request->actual_count;
}

int handle_complete_batch(struct exchange *ex)
{
    ex->cleanup = batch_cleanup;
    const struct jdoc_value *requests;
    if (batch_begin(ex, "actuals", false, &requests) == NULL)
        return 0;
    return batch_decode_and_call(ex, requests, complete_item_decode, complete_batch_call,
                                 complete_batch_reply);
}
