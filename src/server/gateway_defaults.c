/* Limits a call needs that do not exist yet, created from their templates'
 * "default" (docs/gateway.md, "Limit defaults"). A call whose reserve
 * answered unknown_limit_key for a key whose template has a default is
 * queued here; one job of the offload thread at a time takes every call
 * queued, creates what they miss with registry_create_absent (create if
 * absent, never a change: under the registry's lock, so that concurrent
 * first calls create a limit once; all of them in one rewrite of
 * limits.json), and wakes each call, which then reserves again. The HTTP
 * workers never wait for the registry's fsync. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "exchange.h"
#include "services.h"
#include "util/log.h"

/* Calls one round of the job takes: the rest wait for the next round
 * (each call may bring GW_LIMITS_MAX definitions of about 1.4 KiB). */
#define DEFAULTS_CALLS_PER_ROUND 256

void gateway_defaults_init(struct gateway *g)
{
    pthread_mutex_init(&g->defaults_mutex, NULL);
    g->defaults_queue = NULL;
    g->defaults_job = false;
}

void gateway_defaults_free(struct gateway *g)
{
    assert(g->defaults_queue == NULL); /* every call was woken before the server stopped */
    pthread_mutex_destroy(&g->defaults_mutex);
}

/* The default of the plan's key k: that of the first template giving k that
 * has one; NULL when none has, or the call does not reserve k (its amount
 * is 0). */
static const struct limit_definition *key_default(const struct gateway_call *call, uint32_t k)
{
    const struct gw_plan *plan = &call->plan;
    assert(k < plan->key_count);
    if (plan->key_requirement[k] == GW_PLAN_NOT_RESERVED)
        return NULL;
    assert(plan->template_count == call->config->limit_count);
    for (uint32_t t = 0; t < plan->template_count; t++) {
        const struct limit_definition *definition = call->config->limits[t].default_definition;
        if (plan->template_key[t] == k && definition != NULL)
            return definition;
    }
    return NULL;
}

/* The plan's key index of requirement r. */
static uint32_t requirement_key(const struct gateway_call *call, uint32_t r)
{
    for (uint32_t k = 0; k < call->plan.key_count; k++) {
        if (call->plan.key_requirement[k] == r)
            return k;
    }
    assert(!"every requirement comes from a key");
    return 0;
}

bool gateway_defaults_apply(const struct gateway_call *call)
{
    const struct reserve_result *r = &call->reserve_result;
    assert(r->error == BACKEND_UNKNOWN_LIMIT_KEY);
    assert(r->error_index < call->plan.requirement_count);
    return !call->defaults_tried &&
           key_default(call, requirement_key(call, r->error_index)) != NULL;
}

/* ---- the job (offload thread) -------------------------------------------- */

static int creation_compare(const void *a, const void *b)
{
    const struct registry_creation *x = a, *y = b;
    return strcmp(x->definition.key, y->definition.key);
}

static struct registry_creation *creation_of(struct registry_creation *items, size_t count,
                                             const char *key)
{
    struct registry_creation probe;
    snprintf(probe.definition.key, sizeof probe.definition.key, "%s", key);
    struct registry_creation *item = bsearch(&probe, items, count, sizeof *items, creation_compare);
    assert(item != NULL); /* every key with a default of a call was added */
    return item;
}

/* A call that also needs a limit without a default that does not exist
 * would fail after its creations: it creates nothing, and names that key. */
static bool lacks_one_without_default(struct backend *backend, struct gateway_call *call)
{
    for (uint32_t k = 0; k < call->plan.key_count; k++) {
        struct limit_state state;
        if (call->plan.key_requirement[k] == GW_PLAN_NOT_RESERVED || key_default(call, k) != NULL)
            continue;
        if (backend_get_limit(backend, call->plan.key_text[k], &state) ==
            BACKEND_ADMIN_UNKNOWN_KEY) {
            call->defaults_outcome = GATEWAY_DEFAULTS_MISSING;
            call->defaults_key = (uint8_t)k;
            return true;
        }
    }
    return false;
}

/* The definitions the calls need, one per key (sorted by key): NULL with
 * *count 0 when none is needed, or out of memory (*failed set). */
static struct registry_creation *creations_for(struct gateway_call *calls, size_t *count,
                                               bool *failed)
{
    size_t total = 0;
    for (struct gateway_call *call = calls; call != NULL; call = call->next_default) {
        for (uint32_t k = 0;
             k < call->plan.key_count && call->defaults_outcome == GATEWAY_DEFAULTS_PENDING; k++)
            total += key_default(call, k) != NULL;
    }
    *count = 0;
    *failed = false;
    if (total == 0)
        return NULL;
    struct registry_creation *items = malloc(total * sizeof *items);
    if (items == NULL) {
        *failed = true;
        return NULL;
    }
    size_t n = 0;
    for (struct gateway_call *call = calls; call != NULL; call = call->next_default) {
        for (uint32_t k = 0;
             k < call->plan.key_count && call->defaults_outcome == GATEWAY_DEFAULTS_PENDING; k++) {
            const struct limit_definition *definition = key_default(call, k);
            if (definition == NULL)
                continue;
            assert(n < total);
            items[n].definition = *definition;
            assert(call->plan.key_length[k] <= LIMIT_KEY_LENGTH_MAX);
            memcpy(items[n].definition.key, call->plan.key_text[k],
                   (size_t)call->plan.key_length[k] + 1);
            n++;
        }
    }
    assert(n == total);
    qsort(items, n, sizeof *items, creation_compare);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++) {
        if (unique > 0 && strcmp(items[unique - 1].definition.key, items[i].definition.key) == 0)
            continue; /* another call's need of the same key */
        if (unique != i)
            items[unique] = items[i];
        unique++;
    }
    *count = unique;
    return items;
}

/* A call's outcome from those of its keys': the first that failed, in key
 * order; a key created, found, or in force unsaved is there for the reserve. */
static void call_outcome(struct gateway_call *call, struct registry_creation *items, size_t count)
{
    for (uint32_t k = 0; k < call->plan.key_count; k++) {
        if (key_default(call, k) == NULL)
            continue;
        const struct registry_creation *item = creation_of(items, count, call->plan.key_text[k]);
        enum gateway_defaults_outcome outcome;
        switch (item->outcome) {
        case REGISTRY_OK:
        case REGISTRY_EXISTS:
        case REGISTRY_UNSAVED: /* in force; the ticker writes the file */
            continue;
        case REGISTRY_BACKEND_FAILED:
            outcome = GATEWAY_DEFAULTS_UNAVAILABLE;
            break;
        case REGISTRY_WRITE_FAILED:
            outcome = GATEWAY_DEFAULTS_WRITE_FAILED;
            break;
        default:
            outcome = GATEWAY_DEFAULTS_REJECTED;
            snprintf(call->defaults_error, sizeof call->defaults_error, "%s", item->error);
            break;
        }
        call->defaults_outcome = outcome;
        call->defaults_key = (uint8_t)k;
        return;
    }
    call->defaults_outcome = GATEWAY_DEFAULTS_READY;
}

static void log_created(const struct registry_creation *items, size_t count, size_t calls)
{
    size_t created = 0;
    for (size_t i = 0; i < count; i++) {
        const struct registry_creation *item = &items[i];
        if (item->outcome != REGISTRY_OK && item->outcome != REGISTRY_UNSAVED)
            continue;
        created++;
        char capacity[24];
        snprintf(capacity, sizeof capacity, "%" PRIu64, item->definition.capacity);
        log_write(LOG_INFO, "limit created from its template's default", "key",
                  item->definition.key, "kind", limit_kind_name(item->definition.kind), "capacity",
                  capacity, NULL);
    }
    if (created == 0)
        return;
    char numbers[2][24];
    snprintf(numbers[0], sizeof numbers[0], "%zu", created);
    snprintf(numbers[1], sizeof numbers[1], "%zu", calls);
    log_write(LOG_DEBUG, "limits created in one registry write", "limits", numbers[0], "calls",
              numbers[1], NULL);
}

/* One round: the limits every call of the list misses, created; *items
 * (malloc'd, *count of them) are the creations, for the caller to free. */
static void create_for(struct gateway *g, struct gateway_call *calls,
                       struct registry_creation **items_out, size_t *count_out)
{
    struct server *server = g->server;
    size_t taken = 0;
    for (struct gateway_call *call = calls; call != NULL; call = call->next_default) {
        taken++;
        call->defaults_outcome = GATEWAY_DEFAULTS_PENDING;
        lacks_one_without_default(server->backend, call);
    }
    size_t count;
    bool failed;
    struct registry_creation *items = creations_for(calls, &count, &failed);
    if (count > 0)
        registry_create_absent(server->registry, items, count);
    for (struct gateway_call *call = calls; call != NULL; call = call->next_default) {
        if (call->defaults_outcome != GATEWAY_DEFAULTS_PENDING)
            continue; /* named a key without a default */
        if (failed)
            call->defaults_outcome = GATEWAY_DEFAULTS_UNAVAILABLE;
        else
            call_outcome(call, items, count);
    }
    log_created(items, count, taken);
    *items_out = items;
    *count_out = count;
}

/* Wakes each call of the list (its exchange answers or reserves again). */
static void wake(struct gateway_call *calls)
{
    while (calls != NULL) {
        struct gateway_call *next = calls->next_default; /* the call may be gone after done */
        assert(calls->defaults_outcome != GATEWAY_DEFAULTS_PENDING);
        calls->next_default = NULL;
        exchange_backend_done(calls->exchange);
        calls = next;
    }
}

/* Up to DEFAULTS_CALLS_PER_ROUND calls off the queue (the mutex held). */
static struct gateway_call *take_round(struct gateway *g)
{
    struct gateway_call *first = g->defaults_queue, *last = first;
    for (uint32_t n = 1; last != NULL && n < DEFAULTS_CALLS_PER_ROUND; n++)
        last = last->next_default;
    if (last == NULL) {
        g->defaults_queue = NULL;
    } else {
        g->defaults_queue = last->next_default;
        last->next_default = NULL;
    }
    return first;
}

static void defaults_job(void *context)
{
    struct gateway *g = context;
    for (;;) {
        pthread_mutex_lock(&g->defaults_mutex);
        struct gateway_call *calls = take_round(g);
        if (calls == NULL)
            g->defaults_job = false;
        pthread_mutex_unlock(&g->defaults_mutex);
        if (calls == NULL)
            return;
        struct registry_creation *items = NULL;
        size_t count = 0;
        create_for(g, calls, &items, &count);
        wake(calls);
        /* --control: after the calls go on, so none waits for the store. */
        if (g->server->control != NULL && items != NULL)
            control_publish(g->server->control, items, count);
        free(items);
    }
}

void gateway_defaults_create(struct exchange *ex)
{
    struct gateway_call *call = gateway_call_of(ex);
    struct gateway *g = call->gateway;
    assert(call->exchange == ex);
    assert(!call->defaults_tried);
    call->defaults_tried = true;
    call->defaults_outcome = GATEWAY_DEFAULTS_PENDING;
    pthread_mutex_lock(&g->defaults_mutex);
    call->next_default = g->defaults_queue;
    g->defaults_queue = call;
    bool start = !g->defaults_job;
    g->defaults_job = true;
    pthread_mutex_unlock(&g->defaults_mutex);
    if (!start || offload_submit(g->server->offload, defaults_job, g))
        return;
    /* The offload thread has OFFLOAD_JOBS_MAX jobs waiting, or stops: every
     * call queued is answered 503, to be tried again. */
    pthread_mutex_lock(&g->defaults_mutex);
    struct gateway_call *calls = g->defaults_queue;
    g->defaults_queue = NULL;
    g->defaults_job = false;
    pthread_mutex_unlock(&g->defaults_mutex);
    for (struct gateway_call *c = calls; c != NULL; c = c->next_default)
        c->defaults_outcome = GATEWAY_DEFAULTS_BUSY;
    wake(calls);
}
