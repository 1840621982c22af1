/* The wait layer's indexes of tickets: their timers (a deadline, or when to
 * ask the backend again) and a hash table of the waiting leases by id, so
 * that a retried lease id joins its wait. A timer due no sooner than the
 * last one of the ordered run is appended to it, in O(1) both ways; the
 * others go to a binary min-heap. Waiters that share a wait_ms arrive in
 * deadline order, so their timers never touch the heap. Both are sized for
 * max_waiters at open: nothing is allocated per waiter. Under
 * wait->mutex. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "wait_internal.h"

int wait_index_init(struct wait *w)
{
    uint32_t buckets = 16;
    while (buckets < w->options.max_waiters)
        buckets *= 2;
    w->heap = calloc(w->options.max_waiters, sizeof *w->heap);
    w->leases = calloc(buckets, sizeof *w->leases);
    if (w->heap == NULL || w->leases == NULL)
        return -1;
    w->lease_mask = buckets - 1;
    return 0;
}

void wait_index_free(struct wait *w)
{
    free(w->heap);
    free(w->leases);
}

/* ---- timers -------------------------------------------------------------- */

static void heap_place(struct wait *w, uint32_t i, struct wait_ticket *t)
{
    w->heap[i] = t;
    t->timer_index = i;
}

static void heap_up(struct wait *w, uint32_t i)
{
    struct wait_ticket *t = w->heap[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (w->heap[parent]->timer_at_ms <= t->timer_at_ms)
            break;
        heap_place(w, i, w->heap[parent]);
        i = parent;
    }
    heap_place(w, i, t);
}

static void heap_down(struct wait *w, uint32_t i)
{
    struct wait_ticket *t = w->heap[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= w->heap_count)
            break;
        if (child + 1 < w->heap_count &&
            w->heap[child + 1]->timer_at_ms < w->heap[child]->timer_at_ms)
            child++;
        if (w->heap[child]->timer_at_ms >= t->timer_at_ms)
            break;
        heap_place(w, i, w->heap[child]);
        i = child;
    }
    heap_place(w, i, t);
}

static void heap_remove(struct wait *w, uint32_t i)
{
    assert(i < w->heap_count);
    struct wait_ticket *t = w->heap[i];
    t->timer_index = UINT32_MAX;
    w->heap_count--;
    if (i == w->heap_count)
        return;
    struct wait_ticket *moved = w->heap[w->heap_count];
    heap_place(w, i, moved);
    heap_down(w, i);
    heap_up(w, moved->timer_index);
}

static void run_remove(struct wait *w, struct wait_ticket *t)
{
    if (t->timer_prev != NULL)
        t->timer_prev->timer_next = t->timer_next;
    else
        w->run_head = t->timer_next;
    if (t->timer_next != NULL)
        t->timer_next->timer_prev = t->timer_prev;
    else
        w->run_tail = t->timer_prev;
    t->timer_prev = t->timer_next = NULL;
    t->timer_index = UINT32_MAX;
}

static void timer_remove(struct wait *w, struct wait_ticket *t)
{
    if (t->timer_index == WAIT_TIMER_RUN)
        run_remove(w, t);
    else if (t->timer_index != UINT32_MAX)
        heap_remove(w, t->timer_index);
}

void wait_timer_set(struct wait *w, struct wait_ticket *t, int64_t at_ms)
{
    timer_remove(w, t);
    t->timer_at_ms = at_ms;
    if (at_ms == INT64_MAX)
        return;
    if (w->run_tail == NULL || w->run_tail->timer_at_ms <= at_ms) {
        t->timer_prev = w->run_tail;
        t->timer_next = NULL;
        if (w->run_tail != NULL)
            w->run_tail->timer_next = t;
        else
            w->run_head = t;
        w->run_tail = t;
        t->timer_index = WAIT_TIMER_RUN;
        return;
    }
    /* Every ticket in the heap counts in waiting, which is <= max_waiters. */
    assert(w->heap_count < w->options.max_waiters);
    heap_place(w, w->heap_count++, t);
    heap_up(w, t->timer_index);
}

/* The ticket whose timer is due first: the run's head or the heap's top. */
static struct wait_ticket *timer_first(const struct wait *w)
{
    struct wait_ticket *run = w->run_head;
    struct wait_ticket *top = w->heap_count > 0 ? w->heap[0] : NULL;
    if (run == NULL)
        return top;
    if (top == NULL || run->timer_at_ms <= top->timer_at_ms)
        return run;
    return top;
}

struct wait_ticket *wait_timer_pop_due(struct wait *w, int64_t now_ms)
{
    struct wait_ticket *t = timer_first(w);
    if (t == NULL || t->timer_at_ms > now_ms)
        return NULL;
    timer_remove(w, t);
    t->timer_at_ms = INT64_MAX;
    return t;
}

int64_t wait_timer_next(const struct wait *w)
{
    const struct wait_ticket *t = timer_first(w);
    return t == NULL ? INT64_MAX : t->timer_at_ms;
}

void wait_timer_check(const struct wait *w)
{
    const struct wait_ticket *before = NULL;
    for (const struct wait_ticket *t = w->run_head; t != NULL; t = t->timer_next) {
        assert(t->timer_index == WAIT_TIMER_RUN);
        assert(t->timer_prev == before);
        assert(t->timer_at_ms != INT64_MAX);
        assert(before == NULL || before->timer_at_ms <= t->timer_at_ms);
        before = t;
    }
    assert(w->run_tail == before);
    for (uint32_t i = 0; i < w->heap_count; i++) {
        assert(w->heap[i]->timer_index == i);
        assert(i == 0 || w->heap[(i - 1) / 2]->timer_at_ms <= w->heap[i]->timer_at_ms);
    }
}

/* ---- leases -------------------------------------------------------------- */

void wait_lease_insert(struct wait *w, struct wait_ticket *t)
{
    assert(t->primary == NULL);
    struct wait_ticket **bucket = &w->leases[t->lease_hash & w->lease_mask];
    t->lease_next = *bucket;
    *bucket = t;
    w->lease_count++;
}

void wait_lease_remove(struct wait *w, struct wait_ticket *t)
{
    struct wait_ticket **link = &w->leases[t->lease_hash & w->lease_mask];
    while (*link != t) {
        assert(*link != NULL); /* it is in the index */
        link = &(*link)->lease_next;
    }
    *link = t->lease_next;
    t->lease_next = NULL;
    assert(w->lease_count > 0);
    w->lease_count--;
}

struct wait_ticket *wait_lease_find(const struct wait *w, const char *id, uint32_t length,
                                    uint64_t hash)
{
    for (struct wait_ticket *t = w->leases[hash & w->lease_mask]; t != NULL; t = t->lease_next) {
        if (t->lease_hash == hash && t->request->lease_id_length == length &&
            memcmp(t->request->lease_id, id, length) == 0)
            return t;
    }
    return NULL;
}
