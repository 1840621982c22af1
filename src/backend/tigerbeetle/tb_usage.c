/* The usage_batch op of the tigerbeetle backend (backend.h): the balances of
 * many limits read in as few lookup_accounts requests as they fit in, on
 * the sessions' threads, so that no caller waits for the cluster (GET
 * /metrics reads every limit this way; docs/architecture.md "Threads"). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "tb_backend.h"
#include "tb_provision.h"

/* How long a read waits for the cluster: the data path's --tb-deadline-ms,
 * but at most half of Prometheus' default scrape timeout (10 s), so that a
 * scrape of /metrics while the cluster does not answer is answered (without
 * the usage) rather than timed out by the scraper. */
#define TB_USAGE_DEADLINE_MS_MAX 5000

/* A limit's accounts (tb_provision_balance_ids). */
#define USAGE_IDS_PER_LIMIT TB_BALANCE_ACCOUNTS_MAX

/* One request's place in the read. */
struct usage_entry {
    struct tb_limit *limit; /* NULL: answered already (unknown key) */
    uint32_t first_id;      /* its ids in the read's ids[] */
    uint32_t id_count;
    uint32_t item; /* the lookup that carries them */
};

/* One usage_batch call: its lookups, and what to answer when the last
 * comes back. One block; the arrays follow it. */
struct usage_read {
    struct tb_backend *backend;
    struct usage_result *results;
    uint32_t count;
    backend_done_fn done;
    void *context;
    uint32_t remaining; /* atomic: lookups not answered, plus one while submitting */
    uint32_t item_count;
    uint32_t id_count;
    struct usage_entry *entries;  /* count */
    struct tbc_item *items;       /* item_count (at most count) */
    tbc_u128 *ids;                /* id_count (at most 3 per limit) */
    struct tbc_account *accounts; /* one per id */
    uint8_t *found;               /* one per id */
};

/* A read with room for count limits (1..USAGE_BATCH_MAX), or NULL. */
static struct usage_read *read_new(struct tb_backend *b, struct usage_result *results,
                                   uint32_t count, backend_done_fn done, void *context)
{
    assert(count >= 1);
    assert(count <= USAGE_BATCH_MAX);
    size_t ids = (size_t)count * USAGE_IDS_PER_LIMIT;
    size_t size = sizeof(struct usage_read) + ids * sizeof(tbc_u128) +
                  ids * sizeof(struct tbc_account) + count * sizeof(struct tbc_item) +
                  count * sizeof(struct usage_entry) + ids;
    struct usage_read *read = calloc(1, size);
    if (read == NULL)
        return NULL;
    read->backend = b;
    read->results = results;
    read->count = count;
    read->done = done;
    read->context = context;
    /* Largest alignment first: each array starts on its own type's. */
    char *at = (char *)(read + 1);
    read->ids = (tbc_u128 *)at;
    at += ids * sizeof(tbc_u128);
    read->accounts = (struct tbc_account *)at;
    at += ids * sizeof(struct tbc_account);
    read->items = (struct tbc_item *)at;
    at += count * sizeof(struct tbc_item);
    read->entries = (struct usage_entry *)at;
    at += count * sizeof(struct usage_entry);
    read->found = (uint8_t *)at;
    return read;
}

/* The last lookup came back: every result is written, then done. */
static void read_finish(struct usage_read *read)
{
    for (uint32_t i = 0; i < read->count; i++) {
        const struct usage_entry *entry = &read->entries[i];
        if (entry->limit == NULL)
            continue;
        assert(entry->item < read->item_count);
        struct usage_result *result = &read->results[i];
        if (read->items[entry->item].status != TBC_ITEM_OK) {
            result->result = BACKEND_ADMIN_UNAVAILABLE;
            continue;
        }
        struct limit_usage *usage = &result->usage;
        const struct limit_definition *d = &usage->state.definition;
        struct tb_balances balances;
        tb_provision_balances_of(d->kind, &read->accounts[entry->first_id],
                                 &read->found[entry->first_id], &balances);
        usage->reserved = balances.reserved;
        usage->used = balances.used;
        usage->debt = balances.debt;
        usage->available =
            limit_available(d->kind, d->capacity, usage->reserved, usage->used, usage->debt);
        result->result = BACKEND_ADMIN_OK;
    }
    struct tb_backend *b = read->backend;
    backend_done_fn done = read->done;
    void *context = read->context;
    free(read);
    assert(__atomic_load_n(&b->jobs_in_flight, __ATOMIC_RELAXED) > 0);
    __atomic_sub_fetch(&b->jobs_in_flight, 1, __ATOMIC_RELAXED);
    done(context);
}

static void read_release(struct usage_read *read)
{
    if (__atomic_sub_fetch(&read->remaining, 1, __ATOMIC_ACQ_REL) == 0)
        read_finish(read);
}

static void lookup_done(struct tbc_item *item)
{
    read_release(item->context);
}

/* Under the registry lock: each request's limit and state as they are
 * now, and its result when its key is unknown. */
static void read_limits(struct usage_read *read, const struct usage_request *requests)
{
    struct tb_backend *b = read->backend;
    pthread_rwlock_rdlock(&b->registry_lock);
    for (uint32_t i = 0; i < read->count; i++) {
        struct tb_limit *limit =
            tb_registry_find(b, requests[i].key, (uint32_t)strlen(requests[i].key));
        struct usage_result *result = &read->results[i];
        memset(result, 0, sizeof *result);
        if (limit == NULL || limit->deleted) {
            result->result = BACKEND_ADMIN_UNKNOWN_KEY;
            continue;
        }
        read->entries[i].limit = limit; /* never freed while the backend is open */
        result->usage.state = limit->state;
    }
    pthread_rwlock_unlock(&b->registry_lock);
}

/* Each known limit's ids, packed into lookups of at most events_max ids
 * (a limit's ids never split, so each is one read of the cluster). */
static void read_pack(struct usage_read *read, const struct usage_request *requests,
                      uint32_t events_max)
{
    assert(events_max >= USAGE_IDS_PER_LIMIT);
    uint32_t in_item = 0;
    for (uint32_t i = 0; i < read->count; i++) {
        struct usage_entry *entry = &read->entries[i];
        if (entry->limit == NULL)
            continue;
        struct limit_usage *usage = &read->results[i].usage;
        enum limit_kind kind = usage->state.definition.kind;
        int64_t period_ms = INT64_MIN;
        if (kind == LIMIT_BUDGET) {
            struct period_span span =
                period_span_at(&usage->state.definition, requests[i].at_unix_ms);
            period_ms = span.start_ms;
            usage->period_start_unix_ms = span.start_ms;
            usage->period_end_unix_ms = span.end_ms;
        }
        entry->first_id = read->id_count;
        entry->id_count =
            tb_provision_balance_ids(entry->limit, kind, period_ms, &read->ids[read->id_count]);
        if (read->item_count == 0 || in_item + entry->id_count > events_max) {
            read->item_count++;
            in_item = 0;
        }
        entry->item = read->item_count - 1;
        in_item += entry->id_count;
        read->id_count += entry->id_count;
        assert(read->id_count <= read->count * USAGE_IDS_PER_LIMIT);
    }
    assert(read->item_count <= read->count);
}

/* Each lookup's slice of the ids (entries in order, so contiguous). */
static void read_items(struct usage_read *read, int64_t deadline_ms)
{
    for (uint32_t i = 0; i < read->count; i++) {
        const struct usage_entry *entry = &read->entries[i];
        if (entry->limit == NULL)
            continue;
        struct tbc_item *item = &read->items[entry->item];
        if (item->event_count == 0) {
            item->operation = TBC_OPERATION_LOOKUP_ACCOUNTS;
            item->events = &read->ids[entry->first_id];
            item->objects = &read->accounts[entry->first_id];
            item->found = &read->found[entry->first_id];
            item->deadline_ms = deadline_ms;
            item->patient = false; /* no session for a while: answer at once */
            item->done = lookup_done;
            item->context = read;
        }
        item->event_count += entry->id_count;
    }
}

void tb_usage_batch(struct backend *base, const struct usage_request *requests,
                    struct usage_result *results, uint32_t count, backend_done_fn done,
                    void *context)
{
    struct tb_backend *b = tb_backend_of(base);
    assert(count <= USAGE_BATCH_MAX);
    struct usage_read *read = count > 0 ? read_new(b, results, count, done, context) : NULL;
    if (read == NULL) { /* nothing to read, or out of memory */
        for (uint32_t i = 0; i < count; i++)
            results[i].result = BACKEND_ADMIN_UNAVAILABLE;
        done(context);
        return;
    }
    __atomic_add_fetch(&b->jobs_in_flight, 1, __ATOMIC_RELAXED);
    read_limits(read, requests);
    uint32_t events_max = tbc_submitter_events_max(b->submitter, TBC_OPERATION_LOOKUP_ACCOUNTS);
    read_pack(read, requests, events_max);
    int64_t wait_ms = b->item_deadline_ms;
    if (wait_ms > TB_USAGE_DEADLINE_MS_MAX)
        wait_ms = TB_USAGE_DEADLINE_MS_MAX;
    read_items(read, clock_monotonic_ms() + wait_ms);
    /* One count of its own, dropped last, so that a lookup answered at
     * once cannot finish the read while others are still being sent. */
    read->remaining = read->item_count + 1;
    for (uint32_t k = 0; k < read->item_count; k++)
        tbc_submitter_submit(b->submitter, &read->items[k]);
    read_release(read);
}
