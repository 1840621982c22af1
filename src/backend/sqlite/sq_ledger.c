/* The sqlite backend's data path: reserve, complete and release of one
 * request, decided on the writer's mirror and written to the tables (rows,
 * audit events; counters once per transaction), and the expiry of holds,
 * which changes both. A return other than SQLITE_DONE is an SQL or memory
 * error: the writer redoes the transaction without this request. */
#include "sq_ledger.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/retry.h"
#include "sq_backend.h"
#include "sq_holds.h"
#include "sq_leases.h"
#include "sq_mirror.h"

#define FINGERPRINT_BYTES_MAX (REQUIREMENTS_PER_RESERVE_MAX * (LIMIT_KEY_LENGTH_MAX + 24))
#define DENIED_TEXT_BYTES_MAX (REQUIREMENTS_PER_RESERVE_MAX * (LIMIT_KEY_LENGTH_MAX + 1) + 1)

static int64_t i64(uint64_t amount)
{
    assert(amount <= AMOUNT_MAX);
    return (int64_t)amount;
}

/* A lease is forgotten, as in every backend, once it is older than
 * lease_retention_ms and none of its holds is live any more (a retry while a
 * hold lives must never reserve twice). */
static bool forgotten(const struct sq_backend *backend, const struct sq_lease_rec *rec,
                      int64_t now_ms)
{
    if (backend->config.lease_retention_ms <= 0 ||
        rec->created_at_ms > now_ms - backend->config.lease_retention_ms)
        return false;
    for (uint32_t i = 0; i < rec->item_count; i++) {
        if (rec->items[i].live && rec->items[i].expires_at_ms > now_ms)
            return false; /* a hold lives (a due one counts as gone) */
    }
    return true;
}

/* SQLITE_ROW with the lease (pinned for this request), SQLITE_DONE when it
 * is unknown or forgotten, else an error. */
static int lease_get(struct sq_backend *backend, const char *lease_id, int64_t now_ms,
                     struct sq_lease_rec **out)
{
    int rc = sq_leases_find(backend, lease_id, out);
    if (rc == SQLITE_ROW && forgotten(backend, *out, now_ms))
        rc = SQLITE_DONE;
    if (rc == SQLITE_ROW)
        (*out)->pinned = true;
    return rc;
}

/* ---- Expiry of holds. */

/* The lease side of one hold's expiry: its expirations row, its audit event
 * and the caller's budget counters. */
static int expire_item(struct sq_backend *backend, const struct sq_period *p,
                       const struct sq_hold *h, int64_t now_ms)
{
    struct sq_expiry expiry = {.row_id = h->row_id,
                               .limit_id = p->limit->id,
                               .at_ms = now_ms,
                               .amount = h->amount,
                               .lease = h->lease,
                               .audited = !h->completed};
    int rc = sq_leases_expired(backend, &expiry);
    if (rc == SQLITE_DONE && !h->completed && h->lease != NULL)
        rc = sq_leases_caller_add(backend, p->limit, p->start_ms, sq_lease_ref_caller(h->lease),
                                  -(int64_t)h->amount, 0, 0, 0);
    return rc;
}

/* Expires one hold (due or not): the lease side first, then the mirror's. */
static int expire_hold(struct sq_backend *backend, struct sq_period *p, struct sq_hold *h,
                       int64_t now_ms)
{
    int rc = expire_item(backend, p, h, now_ms);
    if (rc != SQLITE_DONE)
        return rc;
    struct sq_hold *removed = NULL;
    p->holds = sq_holds_remove(p->holds, h->expires_at_ms, h->row_id, &removed);
    assert(removed == h);
    p->hold_count--;
    backend->mirror.hold_count--;
    if (removed->completed) {
        p->used -= removed->amount;
        p->debt = p->debt >= removed->debt ? p->debt - removed->debt : 0;
    } else {
        p->reserved -= removed->amount;
        atomic_fetch_add(&backend->expired_holds, 1);
    }
    sq_hold_free(removed);
    sq_mirror_touch(&backend->mirror, p);
    return SQLITE_DONE;
}

static int expire_period(struct sq_backend *backend, struct sq_period *p, int64_t now_ms,
                         uint64_t *budget_left)
{
    for (;;) {
        struct sq_hold *first = sq_holds_first(p->holds);
        if (first == NULL || first->expires_at_ms > now_ms)
            return SQLITE_DONE;
        if (budget_left != NULL) {
            if (*budget_left == 0)
                return SQLITE_DONE;
            (*budget_left)--;
        }
        int rc = expire_hold(backend, p, first, now_ms);
        if (rc != SQLITE_DONE)
            return rc;
    }
}

int sq_ledger_expire(struct sq_backend *backend, struct sq_limit *limit, int64_t now_ms,
                     uint64_t *budget_left)
{
    for (uint32_t i = 0; i < limit->period_count; i++) {
        int rc = expire_period(backend, limit->periods[i], now_ms, budget_left);
        if (rc != SQLITE_DONE)
            return rc;
    }
    return SQLITE_DONE;
}

/* ---- The holds of a lease's items. */

/* The live hold of an item, NULL when it expired or was freed. A hold that
 * is due but not yet expired is expired here first, so the item's story in
 * the audit log (expired, then committed_post_expiry) is the true one. */
static int live_hold(struct sq_backend *backend, const struct sq_limit *limit,
                     const struct sq_lease_rec *rec, uint32_t index, int64_t now_ms,
                     struct sq_period **period, struct sq_hold **out)
{
    const struct sq_lease_item *item = &rec->items[index];
    *out = NULL;
    *period = sq_mirror_period_find(limit, item->period_start_ms);
    if (*period == NULL || !item->live)
        return SQLITE_DONE;
    struct sq_hold *h =
        sq_holds_find((*period)->holds, item->expires_at_ms, sq_hold_row_id(rec->seq, index));
    if (h != NULL && h->expires_at_ms <= now_ms)
        return expire_hold(backend, *period, h, now_ms);
    *out = h;
    return SQLITE_DONE;
}

/* Takes a live reservation out of its period: the capacity it held is
 * free (the wait layer is told after the commit). The hold is the
 * caller's to free or put back. */
static void hold_drop(struct sq_backend *backend, struct sq_period *p, struct sq_hold *h)
{
    struct sq_hold *removed = NULL;
    p->holds = sq_holds_remove(p->holds, h->expires_at_ms, h->row_id, &removed);
    assert(removed == h);
    assert(!h->completed); /* a reservation, not a completed rolling hold */
    assert(p->reserved >= h->amount);
    p->hold_count--;
    backend->mirror.hold_count--;
    p->reserved -= h->amount;
    sq_mirror_touch(&backend->mirror, p);
    sq_mirror_freed(&backend->mirror, p->limit);
}

/* ---- Reserve. */

struct reserve_plan {
    struct sq_limit *limits[REQUIREMENTS_PER_RESERVE_MAX];
    struct sq_period *periods[REQUIREMENTS_PER_RESERVE_MAX];
    char fingerprint[FINGERPRINT_BYTES_MAX];
    char denied[DENIED_TEXT_BYTES_MAX];
};

/* Buffers too large for the stack, used by the writer thread only. */
struct sq_ledger_scratch {
    struct reserve_plan plan;
};

struct sq_ledger_scratch *sq_ledger_scratch_new(void)
{
    return malloc(sizeof(struct sq_ledger_scratch));
}

/* The set of (key, amount) pairs in one canonical text, for lease_conflict. */
static void fingerprint(const struct reserve_request *request, char *out, size_t size)
{
    /* Insertion sort by key: a handful of requirements, keys distinct. */
    const struct requirement *r0 = request->requirements;
    uint8_t order[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        uint32_t j = i;
        for (; j > 0 && strcmp(r0[order[j - 1]].key, r0[i].key) > 0; j--)
            order[j] = order[j - 1];
        order[j] = (uint8_t)i;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct requirement *r = &request->requirements[order[i]];
        char digits[24];
        size_t n = 0;
        uint64_t amount = r->amount;
        do {
            digits[n++] = (char)('0' + amount % 10);
            amount /= 10;
        } while (amount != 0);
        assert(used + n + 1 + r->key_length + 2 <= size);
        while (n > 0)
            out[used++] = digits[--n];
        out[used++] = ' ';
        memcpy(out + used, r->key, r->key_length);
        used += r->key_length;
        out[used++] = '\n';
    }
    out[used] = '\0';
}

/* Errors that are not recorded against the lease, decided in backend.c on
 * the limits as the mirror has them. */
static bool definitive_error(struct sq_backend *backend, const struct reserve_request *request,
                             struct reserve_plan *plan, struct reserve_result *result)
{
    struct limit_view views[REQUIREMENTS_PER_RESERVE_MAX];
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        struct sq_limit *limit =
            sq_mirror_limit_by_key(&backend->mirror, request->requirements[i].key);
        plan->limits[i] = limit;
        views[i] = (struct limit_view){.found = limit != NULL};
        if (limit != NULL) {
            views[i].decreasing = limit->state.status == LIMIT_DECREASING;
            views[i].capacity = limit->state.definition.capacity;
        }
    }
    return !reserve_definitive_check(request, views, backend->config.decrease_retry_ms, result);
}

static uint64_t period_total(const struct sq_period *p)
{
    return amount_add_saturating(amount_add_saturating(p->reserved, p->used), p->debt);
}

static struct denial_times denial_times(struct sq_backend *backend, struct sq_limit *limit,
                                        const struct sq_period *p, uint64_t amount, int64_t now_ms)
{
    const struct limit_definition *d = &limit->state.definition;
    uint64_t blocking = d->kind == LIMIT_BUDGET ? period_total(p) : p->reserved + p->used;
    uint64_t need = amount_add_saturating(blocking, amount) - d->capacity;
    const struct sq_hold *reaching = sq_holds_reaching(p->holds, need);
    struct denial_times t;
    if (d->kind == LIMIT_BUDGET) {
        int64_t end_ms = sq_limit_period_now(limit, now_ms).end_ms;
        t.fits_at_ms =
            reaching != NULL && reaching->expires_at_ms < end_ms ? reaching->expires_at_ms : end_ms;
        t.may_fit_at_ms = p->reserved >= need ? now_ms : end_ms;
    } else {
        /* Rolling holds cover the excess; a window past the last is never reached. */
        t.fits_at_ms =
            reaching != NULL ? reaching->expires_at_ms : now_ms + limit_hold_duration_ms(d);
        t.may_fit_at_ms = p->reserved >= need ? now_ms : t.fits_at_ms;
    }
    t.retry_ms = t.fits_at_ms - now_ms;
    if (d->kind == LIMIT_CONCURRENCY) {
        /* Holds are usually released long before they expire: poll. */
        const struct sq_hold *first = sq_holds_first(p->holds);
        int64_t poll = retry_jitter_ms(backend->config.concurrency_poll_ms, &backend->random_state);
        t.retry_ms = first != NULL && first->expires_at_ms - now_ms < poll
                         ? first->expires_at_ms - now_ms
                         : poll;
    }
    if (t.retry_ms < 1)
        t.retry_ms = 1;
    if (t.fits_at_ms <= now_ms)
        t.fits_at_ms = now_ms + 1;
    return t;
}

static bool fits(const struct sq_period *p, const struct limit_definition *d, uint64_t amount)
{
    uint64_t blocking = d->kind == LIMIT_BUDGET ? period_total(p) : p->reserved + p->used;
    return amount_add_saturating(blocking, amount) <= d->capacity;
}

/* Finds which requirements do not fit; fills denied_index and the times. */
static int decide(struct sq_backend *backend, const struct reserve_request *request,
                  struct reserve_plan *plan, struct reserve_result *result, int64_t now_ms)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        struct sq_limit *limit = plan->limits[i];
        const struct limit_definition *d = &limit->state.definition;
        uint64_t amount = request->requirements[i].amount;
        bool yield = (request->yield_mask >> i & 1) != 0;
        /* Due holds still counted only make the check stricter: expire a
         * few to keep up, and all of them only when the request does not
         * fit without it (a backlog after a pause never stalls a batch). */
        uint64_t few = SQ_EXPIRIES_PER_REQUEST;
        int rc = sq_ledger_expire(backend, limit, now_ms, &few);
        if (rc != SQLITE_DONE)
            return rc;
        int64_t start = d->kind == LIMIT_BUDGET ? sq_limit_period_now(limit, now_ms).start_ms : 0;
        struct sq_period *p = sq_mirror_period(backend, limit, start);
        if (p == NULL)
            return SQLITE_NOMEM;
        plan->periods[i] = p;
        if (fits(p, d, amount) && !yield)
            continue;
        if ((rc = sq_ledger_expire(backend, limit, now_ms, NULL)) != SQLITE_DONE)
            return rc;
        if (fits(p, d, amount) && !yield)
            continue;
        result->denied_index[result->denied_count++] = (uint8_t)i;
        if (fits(p, d, amount)) { /* others wait ahead for it: it may fit once they are in */
            int64_t poll =
                retry_jitter_ms(backend->config.concurrency_poll_ms, &backend->random_state);
            reserve_denial_add(result, (struct denial_times){poll, now_ms + 1, now_ms});
        } else {
            reserve_denial_add(result, denial_times(backend, limit, p, amount, now_ms));
        }
    }
    result->waitable = result->denied_count > 0 && reserve_denial_waitable(request, result);
    return SQLITE_DONE;
}

/* The denied keys, one per line: a retry may list its requirements in
 * another order, and its denied_index must follow that order. */
static void denied_text(const struct reserve_request *request, const struct reserve_result *result,
                        char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < result->denied_count; i++) {
        int n = snprintf(out + used, size - used, "%s\n",
                         request->requirements[result->denied_index[i]].key);
        assert(n > 0 && (size_t)n < size - used);
        used += (size_t)n;
    }
}

/* The lease's requirement set read back from its fingerprint ("<amount>
 * <key>" lines, see fingerprint()): the items point into the text. Their
 * number, or 0 when the text is not one (a damaged row). */
static uint32_t fingerprint_items(const char *text, struct lease_item_key *items)
{
    uint32_t count = 0;
    for (const char *at = text; *at != '\0'; count++) {
        if (count == REQUIREMENTS_PER_RESERVE_MAX)
            return 0;
        uint64_t amount = 0;
        const char *digits = at;
        for (; *at >= '0' && *at <= '9'; at++) {
            uint64_t digit = (uint64_t)(*at - '0');
            if (amount > (AMOUNT_MAX - digit) / 10)
                return 0;
            amount = amount * 10 + digit;
        }
        const char *end = *at == ' ' ? strchr(at + 1, '\n') : NULL;
        if (at == digits || amount == 0 || end == NULL || end == at + 1 ||
            end - (at + 1) > LIMIT_KEY_LENGTH_MAX)
            return 0;
        items[count] = (struct lease_item_key){at + 1, (uint32_t)(end - (at + 1)), amount};
        at = end + 1;
    }
    return count;
}

/* The items the denied text ("<key>" lines) names, as bits. */
static uint64_t denied_items(const char *text, const struct lease_item_key *items, uint32_t count)
{
    assert(count <= REQUIREMENTS_PER_RESERVE_MAX);
    uint64_t bits = 0;
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        for (uint32_t j = 0; j < count; j++) {
            if (items[j].key_length == length && memcmp(items[j].key, line, length) == 0)
                bits |= UINT64_C(1) << j;
        }
        line += end != NULL ? length + 1 : length;
    }
    return bits;
}

/* Answers a known lease again, or lease_conflict (backend.c holds the
 * rule); SQLITE_CORRUPT when its row cannot say what it was. */
static int replay(const struct sq_lease_rec *lease, const struct reserve_request *request,
                  struct reserve_result *result)
{
    assert(lease->state >= SQ_LEASE_ALLOWED);
    assert(lease->state <= SQ_LEASE_DENIED);
    struct lease_item_key items[REQUIREMENTS_PER_RESERVE_MAX];
    uint32_t count = fingerprint_items(lease->fingerprint, items);
    bool denied = lease->state == SQ_LEASE_DENIED;
    struct lease_view view = {
        .state = (enum lease_view_state)lease->state, /* the same values */
        .items = items,
        .item_count = count,
        .denied_items = denied ? denied_items(lease->denied, items, count) : 0,
        .reserved_at_unix_ms = lease->reserved_at_ms,
        .expires_at_unix_ms = lease->expires_at_ms,
        .retry_after_ms = lease->retry_after_ms,
    };
    if (count == 0 || (denied && (view.denied_items == 0 || view.retry_after_ms < 1)))
        return SQLITE_CORRUPT;
    reserve_replay(request, &view, result);
    return SQLITE_DONE;
}

/* The new lease's record, with the answer given. */
static int lease_record(struct sq_backend *backend, const struct reserve_request *request,
                        const struct reserve_plan *plan, const struct reserve_result *result,
                        int64_t now_ms, struct sq_lease_rec **out)
{
    int rc = sq_leases_new(backend, request->lease_id,
                           result->allowed ? request->requirement_count : 0, out);
    if (rc != SQLITE_DONE)
        return rc;
    struct sq_lease_rec *rec = *out;
    rec->pinned = true;
    rec->state = result->allowed ? SQ_LEASE_ALLOWED : SQ_LEASE_DENIED;
    if (request->caller != NULL) {
        assert(request->caller_length < sizeof rec->caller);
        memcpy(rec->caller, request->caller, request->caller_length);
        rec->caller[request->caller_length] = '\0';
    }
    rec->reserved_at_ms = result->reserved_at_unix_ms;
    rec->expires_at_ms = result->expires_at_unix_ms;
    rec->retry_after_ms = result->retry_after_ms;
    rec->created_at_ms = now_ms;
    if (result->allowed && (rec->ref = sq_lease_ref_new(rec->lease_id, rec->caller)) == NULL)
        return SQLITE_NOMEM;
    if (request->mcp_server != NULL) { /* a tool call: named in the audit log */
        assert(request->tool != NULL);
        assert(strlen(request->mcp_server) <= AUDIT_NAME_LENGTH_MAX);
        assert(strlen(request->tool) <= AUDIT_NAME_LENGTH_MAX);
        if ((rec->mcp_server = strdup(request->mcp_server)) == NULL ||
            (rec->tool = strdup(request->tool)) == NULL)
            return SQLITE_NOMEM;
    }
    rc = sq_lease_set_text(rec, &rec->fingerprint, plan->fingerprint);
    return rc == SQLITE_DONE ? sq_lease_set_text(rec, &rec->denied, plan->denied) : rc;
}

static int hold_one(struct sq_backend *backend, const struct reserve_request *request, uint32_t i,
                    struct reserve_plan *plan, struct sq_lease_rec *rec, int64_t now_ms)
{
    const struct requirement *r = &request->requirements[i];
    struct sq_limit *limit = plan->limits[i];
    struct sq_period *p = plan->periods[i];
    struct sq_hold *h = calloc(1, sizeof *h);
    if (h == NULL)
        return SQLITE_NOMEM;
    h->row_id = sq_hold_row_id(rec->seq, i);
    h->amount = r->amount;
    h->lease = sq_lease_ref_keep(rec->ref);
    h->expires_at_ms = now_ms + limit_hold_duration_ms(&limit->state.definition);
    rec->items[i] = (struct sq_lease_item){.limit_id = limit->id,
                                           .amount = r->amount,
                                           .actual = -1,
                                           .held = r->amount,
                                           .period_start_ms = p->start_ms,
                                           .expires_at_ms = h->expires_at_ms,
                                           .state = SQ_ITEM_RESERVED,
                                           .live = true};
    rec->item_count = i + 1;
    int rc = sq_lease_event(backend, rec, now_ms, "reserved", limit->id, r->amount, 0, "");
    if (rc == SQLITE_DONE)
        rc =
            sq_leases_caller_add(backend, limit, p->start_ms, rec->caller, i64(r->amount), 0, 0, 0);
    if (rc != SQLITE_DONE) {
        sq_hold_free(h);
        return rc;
    }
    p->holds = sq_holds_insert(p->holds, h);
    p->hold_count++;
    p->reserved += r->amount;
    backend->mirror.hold_count++;
    sq_mirror_touch(&backend->mirror, p);
    return SQLITE_DONE;
}

static int64_t earliest_expiry(const struct reserve_request *request,
                               const struct reserve_plan *plan, int64_t now_ms)
{
    int64_t earliest = INT64_MAX;
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        int64_t at = now_ms + limit_hold_duration_ms(&plan->limits[i]->state.definition);
        if (at < earliest)
            earliest = at;
    }
    return earliest;
}

/* What each limit has left now that the reserve holds it. */
static void fill_states(const struct reserve_request *request, const struct reserve_plan *plan,
                        int64_t now_ms)
{
    for (uint32_t i = 0; i < request->requirement_count; i++) {
        const struct limit_definition *d = &plan->limits[i]->state.definition;
        const struct sq_period *p = plan->periods[i];
        struct requirement_state *state = &request->states[i];
        state->known = true;
        state->kind = d->kind;
        state->capacity = d->capacity;
        state->available = limit_available(d->kind, d->capacity, p->reserved, p->used, p->debt);
        if (d->kind == LIMIT_BUDGET) {
            state->reset_at_unix_ms = sq_limit_period_now(plan->limits[i], now_ms).end_ms;
            continue;
        }
        const struct sq_hold *first = sq_holds_first(p->holds);
        assert(first != NULL); /* this reserve holds one */
        state->reset_at_unix_ms = first->expires_at_ms;
    }
}

/* Not-yet-known lease: decide, record, hold. */
static int reserve_new(struct sq_backend *backend, const struct reserve_request *request,
                       struct reserve_plan *plan, struct reserve_result *result, int64_t now_ms,
                       struct sq_lease_rec **rec)
{
    int rc = decide(backend, request, plan, result, now_ms);
    if (rc != SQLITE_DONE)
        return rc;
    result->allowed = result->denied_count == 0;
    if (result->waitable) {
        *rec = NULL; /* the caller waits and asks again: nothing recorded */
        return SQLITE_DONE;
    }
    if (result->allowed) {
        result->retry_after_ms = 0;
        result->reserved_at_unix_ms = now_ms;
        result->expires_at_unix_ms = earliest_expiry(request, plan, now_ms);
    }
    denied_text(request, result, plan->denied, sizeof plan->denied);
    if ((rc = lease_record(backend, request, plan, result, now_ms, rec)) != SQLITE_DONE)
        return rc;
    for (uint32_t i = 0; result->allowed && i < request->requirement_count; i++) {
        if ((rc = hold_one(backend, request, i, plan, *rec, now_ms)) != SQLITE_DONE)
            return rc;
    }
    if (result->allowed && request->states != NULL)
        fill_states(request, plan, now_ms);
    return SQLITE_DONE;
}

static int reserve_run(struct sq_backend *backend, const struct reserve_request *request,
                       struct reserve_result *result, struct sq_lease_rec **rec)
{
    struct reserve_plan *plan = &backend->scratch->plan;
    int64_t now_ms = clock_now_ms(backend->config.clock);
    reserve_result_clear(result);
    fingerprint(request, plan->fingerprint, sizeof plan->fingerprint);
    int rc = sq_leases_find(backend, request->lease_id, rec);
    if (rc == SQLITE_ROW && !forgotten(backend, *rec, now_ms))
        return replay(*rec, request, result); /* answered as it was */
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    if (definitive_error(backend, request, plan, result)) {
        *rec = NULL;
        return SQLITE_DONE;
    }
    /* The id of a forgotten lease is free again: a new lease. */
    if (rc == SQLITE_ROW && (rc = sq_leases_forget(backend, *rec)) != SQLITE_DONE)
        return rc;
    *rec = NULL;
    return reserve_new(backend, request, plan, result, now_ms, rec);
}

int sq_ledger_reserve(struct sq_backend *backend, const struct reserve_request *request,
                      struct reserve_result *result)
{
    assert(request->requirement_count >= 1);
    assert(request->requirement_count <= REQUIREMENTS_PER_RESERVE_MAX);
    struct sq_lease_rec *rec = NULL;
    int rc = reserve_run(backend, request, result, &rec);
    if (rec != NULL)
        rec->pinned = false;
    return rc;
}

/* ---- Complete. */

struct settle {
    struct sq_backend *backend;
    struct sq_lease_rec *rec;
    int64_t now_ms;
    struct complete_result *result; /* gets the warnings */
};

static int warn(struct settle *s, enum backend_warning kind, const char *key)
{
    return complete_result_warn(s->result, kind, key, (uint32_t)strlen(key)) == 0 ? SQLITE_DONE
                                                                                  : SQLITE_NOMEM;
}

static int event(struct settle *s, const char *type, const struct sq_limit *limit,
                 const struct sq_lease_item *item, uint64_t actual, const char *detail)
{
    return sq_lease_event(s->backend, s->rec, s->now_ms, type, limit->id, item->amount, actual,
                          detail);
}

/* The item's state once settled: what it still holds (rolling), its debt. */
static void item_settle(struct settle *s, struct sq_lease_item *item, enum sq_item_state state,
                        uint64_t actual, uint64_t held, uint64_t debt, bool live)
{
    item->state = state;
    item->actual = i64(actual);
    item->held = held;
    item->debt = debt;
    item->live = live;
    item->committed_at_ms = s->now_ms;
    s->rec->dirty = true;
}

/* Whether a rolling hold of `amount` (out of the counters) can grow by extra. */
static bool grows(const struct sq_period *p, uint64_t amount, uint64_t extra,
                  const struct sq_limit *limit)
{
    return amount_add_saturating(p->reserved + p->used + amount, extra) <=
           limit->state.definition.capacity;
}

/* Rolling: the hold shrinks (or grows, per overage) to the actual amount
 * until its original expiry. */
static int settle_rolling(struct settle *s, struct sq_limit *limit, struct sq_lease_item *item,
                          struct sq_period *p, struct sq_hold *h, uint64_t actual)
{
    int rc = SQLITE_DONE;
    if (h == NULL) {
        item_settle(s, item, SQ_ITEM_COMMITTED, actual, 0, 0, false);
        return event(s, "committed", limit, item, actual, "");
    }
    hold_drop(s->backend, p, h);
    uint64_t held = actual, debt = 0;
    if (actual > h->amount) {
        uint64_t extra = actual - h->amount;
        /* Decide the overage on counters free of due holds. */
        if (!grows(p, h->amount, extra, limit) &&
            (rc = sq_ledger_expire(s->backend, limit, s->now_ms, NULL)) != SQLITE_DONE) {
            sq_hold_free(h);
            return rc;
        }
        if (!grows(p, h->amount, extra, limit)) {
            held = h->amount;
            if (limit->state.definition.overage == OVERAGE_DEBT) {
                debt = extra;
                p->debt = amount_add_saturating(p->debt, debt);
                rc = warn(s, BACKEND_WARNING_OVERAGE_DEBT, limit->state.definition.key);
                if (rc == SQLITE_DONE)
                    rc = event(s, "debt", limit, item, debt, "rolling overage held as debt");
            } else {
                atomic_fetch_add(&s->backend->overage_denied, 1);
                rc = warn(s, BACKEND_WARNING_OVERAGE_DENIED, limit->state.definition.key);
            }
        }
        if (rc == SQLITE_DONE)
            rc = event(s, "overrun", limit, item, actual, "");
    }
    p->used += held;
    if (held > 0 || debt > 0) {
        h->amount = held;
        h->debt = debt;
        h->completed = true;
        p->holds = sq_holds_insert(p->holds, h);
        p->hold_count++;
        s->backend->mirror.hold_count++;
    } else {
        sq_hold_free(h);
    }
    item_settle(s, item, SQ_ITEM_COMMITTED, actual, held, debt, held > 0 || debt > 0);
    if (rc == SQLITE_DONE)
        rc = event(s, "committed", limit, item, actual, "");
    return rc;
}

static int settle_concurrency(struct settle *s, struct sq_limit *limit, struct sq_lease_item *item,
                              struct sq_period *p, struct sq_hold *h, uint64_t actual)
{
    if (h != NULL) {
        hold_drop(s->backend, p, h);
        sq_hold_free(h);
    }
    item_settle(s, item, SQ_ITEM_COMMITTED, actual, 0, 0, false);
    return event(s, "committed", limit, item, actual, "");
}

static uint64_t budget_room(const struct sq_period *p, const struct sq_limit *limit)
{
    uint64_t total = period_total(p), capacity = limit->state.definition.capacity;
    return total < capacity ? capacity - total : 0;
}

/* Budget: the actual amount is charged to the period the lease was reserved
 * in; what does not fit is debt there. Late commits are charged and warned. */
static int settle_budget(struct settle *s, struct sq_limit *limit, struct sq_lease_item *item,
                         struct sq_period *p, struct sq_hold *h, uint64_t actual)
{
    int rc = SQLITE_DONE;
    bool expired = h == NULL;
    int64_t released = 0;
    uint64_t covered = 0; /* the part of the actual its live reservation covers */
    if (h != NULL) {
        hold_drop(s->backend, p, h);
        released = i64(h->amount);
        covered = actual < h->amount ? actual : h->amount;
        sq_hold_free(h);
    } else if ((p = sq_mirror_period(s->backend, limit, item->period_start_ms)) == NULL) {
        return SQLITE_NOMEM;
    }
    /* docs/semantics.md, "Budgets": what the reservation covers had room
     * when it was reserved, so it is used; only the excess is tested against
     * the room left (on counters free of due holds), the rest is debt. */
    p->used = amount_add_saturating(p->used, covered);
    uint64_t excess = actual - covered;
    if (budget_room(p, limit) < excess &&
        (rc = sq_ledger_expire(s->backend, limit, s->now_ms, NULL)) != SQLITE_DONE)
        return rc;
    uint64_t room = budget_room(p, limit);
    uint64_t fit = excess < room ? excess : room;
    uint64_t debt = excess - fit;
    fit += covered; /* all that is used, for the caller's counters */
    p->used += fit - covered;
    p->debt = amount_add_saturating(p->debt, debt);
    sq_mirror_touch(&s->backend->mirror, p);
    const char *key = limit->state.definition.key;
    if (expired && (rc = warn(s, BACKEND_WARNING_COMMIT_AFTER_EXPIRY, key)) != SQLITE_DONE)
        return rc;
    if (debt > 0 && (rc = warn(s, BACKEND_WARNING_OVERAGE_DEBT, key)) != SQLITE_DONE)
        return rc;
    /* A budget's debt stays in its period's counters: the item holds nothing. */
    item_settle(s, item, expired ? SQ_ITEM_COMMITTED_POST_EXPIRY : SQ_ITEM_COMMITTED, actual, 0,
                debt, false);
    rc = event(s, expired ? "committed_post_expiry" : "committed", limit, item, actual, "");
    if (rc == SQLITE_DONE && actual > item->amount)
        rc = event(s, "overrun", limit, item, actual, "");
    if (rc == SQLITE_DONE && debt > 0)
        rc = event(s, "debt", limit, item, debt, "over the budget of the period");
    if (rc == SQLITE_DONE)
        rc = sq_leases_caller_add(s->backend, limit, p->start_ms, s->rec->caller, -released,
                                  i64(fit), i64(debt), 1);
    return rc;
}

/* Settles one item of the lease at actual, with its live hold (NULL: it
 * expired) and the period it was reserved in (NULL when the mirror no
 * longer keeps it). */
static int settle_item(struct settle *s, uint32_t index, uint64_t actual)
{
    assert(index < s->rec->item_count);
    struct sq_lease_item *item = &s->rec->items[index];
    struct sq_limit *limit = sq_mirror_limit_by_id(&s->backend->mirror, item->limit_id);
    if (limit == NULL)
        return SQLITE_CORRUPT;
    struct sq_period *p = NULL;
    struct sq_hold *h = NULL;
    int rc = live_hold(s->backend, limit, s->rec, index, s->now_ms, &p, &h);
    if (rc != SQLITE_DONE)
        return rc;
    assert(h == NULL || p != NULL); /* a live hold is in its period */
    switch (limit->state.definition.kind) {
    case LIMIT_ROLLING:
        return settle_rolling(s, limit, item, p, h, actual);
    case LIMIT_CONCURRENCY:
        return settle_concurrency(s, limit, item, p, h, actual);
    case LIMIT_BUDGET:
        return settle_budget(s, limit, item, p, h, actual);
    default:
        return SQLITE_CORRUPT;
    }
}

/* Keeps expiry going on the lease's limits, a few holds each (the lease's
 * own holds are checked one by one in live_hold). */
static int expire_items(struct sq_backend *backend, const struct sq_lease_rec *rec, int64_t now_ms)
{
    for (uint32_t i = 0; i < rec->item_count; i++) {
        struct sq_limit *limit = sq_mirror_limit_by_id(&backend->mirror, rec->items[i].limit_id);
        if (limit == NULL)
            return SQLITE_CORRUPT;
        uint64_t few = SQ_EXPIRIES_PER_REQUEST;
        int rc = sq_ledger_expire(backend, limit, now_ms, &few);
        if (rc != SQLITE_DONE)
            return rc;
    }
    return SQLITE_DONE;
}

static const char *item_key(struct sq_backend *backend, const struct sq_lease_item *item)
{
    const struct sq_limit *limit = sq_mirror_limit_by_id(&backend->mirror, item->limit_id);
    return limit != NULL ? limit->state.definition.key : "";
}

static const struct actual *actual_for(const struct complete_request *request, const char *key)
{
    for (uint32_t i = 0; i < request->actual_count; i++) {
        if (strcmp(request->actuals[i].key, key) == 0)
            return &request->actuals[i];
    }
    return NULL;
}

static bool actuals_valid(struct sq_backend *backend, const struct complete_request *request,
                          const struct sq_lease_rec *rec, struct complete_result *result)
{
    for (uint32_t i = 0; i < request->actual_count; i++) {
        bool found = false;
        for (uint32_t j = 0; j < rec->item_count && !found; j++)
            found = strcmp(item_key(backend, &rec->items[j]), request->actuals[i].key) == 0;
        if (!found) {
            complete_result_fail(result, BACKEND_ACTUAL_KEY_NOT_IN_LEASE, i);
            return false;
        }
    }
    return true;
}

static int complete_live(struct sq_backend *backend, const struct complete_request *request,
                         struct sq_lease_rec *rec, struct complete_result *result, int64_t now_ms)
{
    if (!actuals_valid(backend, request, rec, result))
        return SQLITE_DONE;
    int rc = expire_items(backend, rec, now_ms);
    if (rc != SQLITE_DONE)
        return rc;
    struct settle s = {.backend = backend, .rec = rec, .now_ms = now_ms, .result = result};
    for (uint32_t i = 0; i < rec->item_count; i++) {
        const struct actual *a = actual_for(request, item_key(backend, &rec->items[i]));
        /* A key left out settles at its reserved amount (pessimistic). */
        rc = settle_item(&s, i, a != NULL ? a->actual_amount : rec->items[i].amount);
        if (rc != SQLITE_DONE)
            return rc;
    }
    rec->state = SQ_LEASE_COMPLETED;
    rec->finished_at_ms = now_ms;
    rec->dirty = true;
    result->reconciled = true;
    return SQLITE_DONE;
}

static int complete_run(struct sq_backend *backend, const struct complete_request *request,
                        struct complete_result *result, struct sq_lease_rec **rec)
{
    int64_t now_ms = clock_now_ms(backend->config.clock);
    free(result->warnings); /* of an earlier try of a redone transaction */
    complete_result_clear(result);
    int rc = lease_get(backend, request->lease_id, now_ms, rec);
    if (rc == SQLITE_DONE || (rc == SQLITE_ROW && (*rec)->state == SQ_LEASE_DENIED))
        return SQLITE_DONE; /* nothing held: reconciled=false */
    if (rc != SQLITE_ROW)
        return rc;
    if ((*rec)->state == SQ_LEASE_RELEASED) {
        complete_result_fail(result, BACKEND_ALREADY_FINALIZED, 0);
        return SQLITE_DONE;
    }
    if ((*rec)->state == SQ_LEASE_COMPLETED) {
        result->reconciled = true; /* completing twice is a no-op success */
        return SQLITE_DONE;
    }
    return complete_live(backend, request, *rec, result, now_ms);
}

int sq_ledger_complete(struct sq_backend *backend, const struct complete_request *request,
                       struct complete_result *result)
{
    struct sq_lease_rec *rec = NULL;
    int rc = complete_run(backend, request, result, &rec);
    if (rec != NULL)
        rec->pinned = false;
    return rc;
}

/* ---- Release. */

static int release_item(struct sq_backend *backend, struct sq_lease_rec *rec, uint32_t index,
                        int64_t now_ms)
{
    struct sq_lease_item *item = &rec->items[index];
    struct sq_limit *limit = sq_mirror_limit_by_id(&backend->mirror, item->limit_id);
    if (limit == NULL)
        return SQLITE_CORRUPT;
    struct sq_period *p = NULL;
    struct sq_hold *h = NULL;
    int rc = live_hold(backend, limit, rec, index, now_ms, &p, &h);
    if (rc != SQLITE_DONE || h == NULL)
        return rc; /* an expired hold has nothing left to free */
    hold_drop(backend, p, h);
    int64_t amount = i64(h->amount);
    sq_hold_free(h);
    item->state = SQ_ITEM_RELEASED;
    item->held = 0;
    item->debt = 0;
    item->live = false;
    rec->dirty = true;
    rc = sq_lease_event(backend, rec, now_ms, "released", limit->id, item->amount, 0, "");
    if (rc == SQLITE_DONE)
        rc = sq_leases_caller_add(backend, limit, p->start_ms, rec->caller, -amount, 0, 0, 0);
    return rc;
}

static int release_run(struct sq_backend *backend, const struct release_request *request,
                       struct release_result *result, struct sq_lease_rec **rec)
{
    int64_t now_ms = clock_now_ms(backend->config.clock);
    result->error = BACKEND_OK;
    int rc = lease_get(backend, request->lease_id, now_ms, rec);
    if (rc == SQLITE_DONE)
        return SQLITE_DONE; /* unknown: no-op success */
    if (rc != SQLITE_ROW)
        return rc;
    if ((*rec)->state == SQ_LEASE_COMPLETED) {
        result->error = BACKEND_ALREADY_FINALIZED;
        return SQLITE_DONE;
    }
    if ((*rec)->state != SQ_LEASE_ALLOWED)
        return SQLITE_DONE; /* released twice, or denied: nothing held */
    if ((rc = expire_items(backend, *rec, now_ms)) != SQLITE_DONE)
        return rc;
    for (uint32_t i = 0; i < (*rec)->item_count; i++) {
        if ((rc = release_item(backend, *rec, i, now_ms)) != SQLITE_DONE)
            return rc;
    }
    (*rec)->state = SQ_LEASE_RELEASED;
    (*rec)->finished_at_ms = now_ms;
    (*rec)->dirty = true;
    return SQLITE_DONE;
}

int sq_ledger_release(struct sq_backend *backend, const struct release_request *request,
                      struct release_result *result)
{
    struct sq_lease_rec *rec = NULL;
    int rc = release_run(backend, request, result, &rec);
    if (rec != NULL)
        rec->pinned = false;
    return rc;
}
