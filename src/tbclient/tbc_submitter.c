/* Session threads, the per-operation queues, and a monitor thread that
 * fails overdue items, fails everything at once while no session can
 * reach the cluster, and keeps a light request going so a 0.15.3 server
 * runs its pending-transfer expiry (docs/tigerbeetle-protocol.md,
 * "Pending transfers and expiry"). */
#include "tbc_submitter.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tbc_body.h"
#include "core/clock.h"
#include "tbc_ids.h"
#include "tbc_bounds.h"
#include "util/queue.h"

#define QUEUE_COUNT 4
#define MONITOR_INTERVAL_MS 25
#define NOT_READY_PAUSE_MS 20
#define IDLE_WAIT_MS 200

struct queue {
    struct tbc_item *head;
    struct tbc_item *tail;
};

struct worker {
    struct tbc_submitter *submitter;
    pthread_t thread;
    struct tbc_session session;
    bool ready;             /* under the submitter lock */
    bool reachable;         /* under the lock: some replica connected */
    int64_t sent_at_ms;     /* under the lock: when its request went out, 0 if none */
    bool stale;             /* under the lock: its request outlived its items' deadline */
    int64_t since_reply_ns; /* its request went out this long after the last reply */
};

struct tbc_submitter {
    tbc_u128 cluster;
    struct tbc_address addresses[TBC_REPLICAS_MAX];
    uint32_t address_count;

    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t monitor_wake;
    struct queue queues[QUEUE_COUNT];
    uint32_t queued_items;
    uint64_t queued_events;
    uint32_t in_flight;      /* requests out now */
    uint32_t stale_requests; /* workers whose request outlived its items (may still land) */
    uint32_t last_batch_items;
    int64_t last_round_trip_us;
    int64_t answered_at_ns; /* monotonic: when the last request came back */
    int64_t replied_at_ns;  /* monotonic: when the last reply arrived (before its answers) */
    /* Waiting workers need this many items queued before they would send
     * (0: any item), so a submit wakes them only then. */
    uint32_t wake_items;
    uint64_t sequence;
    bool stopping;

    uint32_t sessions_ready;
    uint32_t sessions_reachable;
    int64_t last_reachable_ms; /* monotonic: when a session last reached a replica */
    int64_t last_request_ms;
    enum tbc_dialect dialect;
    uint32_t server_release;
    uint32_t batch_size_limit; /* smallest announced by a session */
    uint32_t view;             /* highest a session has seen */

    uint64_t cluster_time_ns;   /* last reply timestamp */
    int64_t cluster_time_at_ns; /* monotonic ns when it arrived */

    struct tbc_submitter_stats stats;

    /* the keepalive lookup */
    struct tbc_item keepalive;
    tbc_u128 keepalive_id;
    uint8_t keepalive_object[TBC_EVENT_SIZE];
    uint8_t keepalive_found;
    bool keepalive_busy;

    pthread_t monitor;
    bool monitor_started;
    uint32_t worker_count;
    uint32_t workers_started;
    struct worker workers[];
};

static int queue_index(uint8_t operation)
{
    switch (operation) {
    case TBC_OPERATION_CREATE_ACCOUNTS:
        return 0;
    case TBC_OPERATION_CREATE_TRANSFERS:
        return 1;
    case TBC_OPERATION_LOOKUP_ACCOUNTS:
        return 2;
    case TBC_OPERATION_LOOKUP_TRANSFERS:
        return 3;
    default:
        return -1;
    }
}

static const uint8_t queue_operation[QUEUE_COUNT] = {
    TBC_OPERATION_CREATE_ACCOUNTS, TBC_OPERATION_CREATE_TRANSFERS, TBC_OPERATION_LOOKUP_ACCOUNTS,
    TBC_OPERATION_LOOKUP_TRANSFERS};

static void answer_list(struct tbc_item *list, enum tbc_item_status status)
{
    while (list != NULL) {
        struct tbc_item *next = list->next;
        list->next = NULL;
        list->status = status;
        list->done(list);
        list = next;
    }
}

static bool failing_fast(const struct tbc_submitter *sub, int64_t now_ms, bool patient);

/* Under the lock: every queued item whose deadline passed, or that must
 * fail fast (everything when `all`), unlinked and returned as one list. */
static struct tbc_item *unlink_overdue(struct tbc_submitter *sub, int64_t now_ms, bool all)
{
    struct tbc_item *failed = NULL, **failed_tail = &failed;
    for (int q = 0; q < QUEUE_COUNT; q++) {
        struct queue *queue = &sub->queues[q];
        struct tbc_item *keep = NULL, **keep_tail = &keep, *last = NULL;
        for (struct tbc_item *item = queue->head, *next; item != NULL; item = next) {
            next = item->next;
            item->next = NULL;
            if (all || item->deadline_ms <= now_ms || failing_fast(sub, now_ms, item->patient)) {
                *failed_tail = item;
                failed_tail = &item->next;
                sub->queued_items--;
                sub->queued_events -= item->event_count;
            } else {
                *keep_tail = item;
                keep_tail = &item->next;
                last = item;
            }
        }
        queue->head = keep;
        queue->tail = last;
    }
    return failed;
}

/* No session has reached any replica for a while: answer at once, don't
 * queue. A cluster that is only slow (a view change, a lost backup, a
 * stopped server) keeps its connections: work waits for its deadline
 * there, since a session may come back with an answer any moment. Patient
 * (admin) work gives a starting or restarting cluster longer. */
static bool failing_fast(const struct tbc_submitter *sub, int64_t now_ms, bool patient)
{
    int64_t after_ms = patient ? TBC_PATIENT_FAIL_AFTER_MS : TBC_FAIL_FAST_AFTER_MS;
    return sub->sessions_reachable == 0 && now_ms - sub->last_reachable_ms > after_ms;
}

static void set_state(struct tbc_submitter *sub, struct worker *w, bool ready)
{
    bool reachable = ready || tbc_session_connected(&w->session);
    pthread_mutex_lock(&sub->lock);
    if (ready != w->ready) {
        w->ready = ready;
        if (ready)
            sub->sessions_ready++;
        else
            sub->sessions_ready--;
    }
    if (reachable != w->reachable) {
        w->reachable = reachable;
        if (reachable)
            sub->sessions_reachable++;
        else
            sub->sessions_reachable--;
    }
    if (reachable)
        sub->last_reachable_ms = clock_monotonic_ms();
    if (ready) {
        sub->dialect = w->session.dialect;
        sub->server_release = w->session.release;
        if (w->session.batch_size_limit < sub->batch_size_limit)
            sub->batch_size_limit = w->session.batch_size_limit;
        if (w->session.view > sub->view)
            sub->view = w->session.view;
    }
    pthread_mutex_unlock(&sub->lock);
}

/* Under the lock: the queue whose head was submitted first. */
static int oldest_queue(const struct tbc_submitter *sub)
{
    int best = -1;
    for (int q = 0; q < QUEUE_COUNT; q++) {
        const struct tbc_item *head = sub->queues[q].head;
        if (head != NULL && (best < 0 || head->sequence < sub->queues[best].head->sequence))
            best = q;
    }
    return best;
}

static void record_answer(struct tbc_submitter *sub, struct worker *w, uint32_t items,
                          uint32_t events, int64_t started_ns)
{
    int64_t now_ns = clock_monotonic_ns();
    pthread_mutex_lock(&sub->lock);
    sub->stats.requests++;
    sub->stats.items += items;
    sub->stats.events += events;
    sub->stats.round_trip_us += (uint64_t)((now_ns - started_ns) / 1000);
    sub->last_round_trip_us = (now_ns - started_ns) / 1000;
    sub->replied_at_ns = now_ns;
    if (w->session.view > sub->view)
        sub->view = w->session.view;
    if (w->session.reply_timestamp > sub->cluster_time_ns) {
        sub->cluster_time_ns = w->session.reply_timestamp;
        sub->cluster_time_at_ns = now_ns;
    }
    pthread_mutex_unlock(&sub->lock);
}

static void request_over(struct tbc_submitter *sub, struct worker *w);

/* A worker's request that outlived its items' deadline, or is settled
 * (answered, or given up with its session: it can no longer land). */
static void mark_stale(struct tbc_submitter *sub, struct worker *w, bool stale)
{
    pthread_mutex_lock(&sub->lock);
    if (stale != w->stale) {
        w->stale = stale;
        if (stale)
            sub->stale_requests++;
        else
            sub->stale_requests--;
    }
    assert(sub->stale_requests <= sub->worker_count);
    pthread_mutex_unlock(&sub->lock);
}

/* Sends one batch and answers its items. */
static void run_batch(struct tbc_submitter *sub, struct worker *w, uint8_t operation,
                      struct tbc_item *batch, uint32_t events)
{
    uint32_t items = 0;
    int64_t deadline_ms = 0;
    for (struct tbc_item *item = batch; item != NULL; item = item->next) {
        items++;
        /* The latest deadline: a late right answer beats an unknown one. */
        if (item->deadline_ms > deadline_ms)
            deadline_ms = item->deadline_ms;
    }
    uint8_t *body = tbc_session_body(&w->session);
    uint32_t size = tbc_batch_encode(batch, tbc_body_event_size(operation), body);
    uint32_t bad_index, bad_code;
    int valid = tbc_body_validate(operation, body, size, w->session.batch_size_limit,
                                  w->session.dialect, &bad_index, &bad_code);
    assert(valid == TBC_BODY_OK); /* every item was checked at submit */
    assert(tbc_item_chains_closed(batch));

    int64_t started_ns = clock_monotonic_ns();
    if (tbc_trace_enabled())
        fprintf(stderr,
                "tb submitter: operation %u, %u items, %u events, waited %.3f ms, "
                "%.3f ms after the last reply\n",
                operation, items, events, (double)(started_ns - batch->queued_at_ns) / 1e6,
                (double)w->since_reply_ns / 1e6);
    int rc = tbc_session_call(&w->session, operation, size, deadline_ms);
    if (tbc_trace_enabled())
        fprintf(stderr, "tb submitter: answered in %.3f ms\n",
                (double)(clock_monotonic_ns() - started_ns) / 1e6);
    enum tbc_item_status status = TBC_ITEM_UNAVAILABLE;
    if (rc == TBC_SESSION_OK) {
        const uint8_t *reply = w->session.reply_body;
        uint32_t reply_size = w->session.reply_body_size;
        bool create = operation == TBC_OPERATION_CREATE_ACCOUNTS ||
                      operation == TBC_OPERATION_CREATE_TRANSFERS;
        int mapped = create ? tbc_batch_distribute_create(batch, events, reply, reply_size,
                                                          w->session.reply_timestamp)
                            : tbc_batch_distribute_lookup(batch, reply, reply_size);
        if (mapped == 0) {
            status = TBC_ITEM_OK;
            record_answer(sub, w, items, events, started_ns);
        } else {
            fprintf(stderr, "tigerbeetle: malformed reply to operation %u (%u bytes)\n", operation,
                    reply_size);
        }
    } else {
        set_state(sub, w, false);
        if (w->session.in_flight) /* still resent: it may take effect yet */
            mark_stale(sub, w, true);
    }
    if (status != TBC_ITEM_OK) {
        pthread_mutex_lock(&sub->lock);
        sub->stats.failed_items += items;
        pthread_mutex_unlock(&sub->lock);
    }
    /* The answers first: what they queue (the callers' next requests)
     * then goes out together, not on another session one by one. */
    answer_list(batch, status);
    request_over(sub, w);
}

static void wait_us(struct tbc_submitter *sub, int64_t us)
{
    struct timespec until = clock_deadline(CLOCK_REALTIME, us);
    pthread_cond_timedwait(&sub->work, &sub->lock, &until);
}

/* Under the lock: whether to send now, or how long to wait (*wait). With
 * nothing in flight work goes at once; with a request out it waits to
 * grow (TBC_EAGER_EVENTS, TBC_STALL_MS), so load makes batches larger
 * rather than requests more numerous. */
/* Nothing in flight: go, or linger for the callers the last answer freed.
 * Callers answered together come back together: after a request of N
 * items, wait (from its answer, at most two round trips and
 * TBC_LINGER_US_MAX) until N items are queued, so the next request carries
 * them all instead of the first few. */
static bool send_idle(struct tbc_submitter *sub, int64_t *wait_us)
{
    uint32_t expected = sub->last_batch_items;
    if (expected < TBC_LINGER_BATCH_MIN || sub->queued_items >= expected)
        return true;
    int64_t linger_us = 2 * sub->last_round_trip_us;
    if (linger_us > TBC_LINGER_US_MAX)
        linger_us = TBC_LINGER_US_MAX;
    int64_t since_us = (clock_monotonic_ns() - sub->answered_at_ns) / 1000;
    if (since_us >= linger_us)
        return true;
    *wait_us = linger_us - since_us;
    sub->wake_items = expected;
    return false;
}

static bool send_now(struct tbc_submitter *sub, int64_t *wait_us)
{
    *wait_us = IDLE_WAIT_MS * 1000;
    sub->wake_items = 0;
    int q = oldest_queue(sub);
    if (q < 0)
        return false;
    if (sub->in_flight == 0)
        return send_idle(sub, wait_us);
    if (sub->queued_events >= TBC_EAGER_EVENTS)
        return true;
    int64_t oldest_ms = INT64_MAX;
    for (uint32_t i = 0; i < sub->worker_count; i++) {
        int64_t at = sub->workers[i].sent_at_ms;
        if (at != 0 && at < oldest_ms)
            oldest_ms = at;
    }
    int64_t out_ms = clock_monotonic_ms() - oldest_ms;
    if (out_ms >= TBC_STALL_MS)
        return true;
    *wait_us = (TBC_STALL_MS - out_ms) * 1000;
    sub->wake_items = UINT32_MAX; /* only TBC_EAGER_EVENTS, the stall or an answer */
    return false;
}

/* Waits for work; returns the next batch, or NULL when stopping or after
 * IDLE_WAIT_MS without work (then the caller checks its connection). */
static struct tbc_item *next_batch(struct tbc_submitter *sub, struct worker *w, uint8_t *operation,
                                   uint32_t *events)
{
    pthread_mutex_lock(&sub->lock);
    int64_t wait = 0;
    int64_t idle_until = clock_monotonic_ms() + IDLE_WAIT_MS;
    while (!sub->stopping && !send_now(sub, &wait)) {
        if (clock_monotonic_ms() >= idle_until) {
            sub->wake_items = 0;
            pthread_mutex_unlock(&sub->lock);
            return NULL;
        }
        wait_us(sub, wait);
    }
    sub->wake_items = 0;
    if (sub->stopping) {
        pthread_mutex_unlock(&sub->lock);
        return NULL;
    }
    int q = oldest_queue(sub);
    assert(q >= 0);
    *operation = queue_operation[q];
    uint32_t events_max = tbc_body_events_max(*operation, w->session.batch_size_limit);
    struct tbc_item *batch =
        tbc_batch_take(&sub->queues[q].head, &sub->queues[q].tail, events_max, events);
    uint32_t taken = 0;
    for (struct tbc_item *item = batch; item != NULL; item = item->next)
        taken++;
    sub->queued_items -= taken;
    sub->last_batch_items = taken;
    sub->queued_events -= *events;
    sub->in_flight++;
    sub->last_request_ms = clock_monotonic_ms();
    w->sent_at_ms = sub->last_request_ms;
    if (tbc_trace_enabled()) /* the trace's "after the last reply" */
        w->since_reply_ns = sub->replied_at_ns != 0 ? clock_monotonic_ns() - sub->replied_at_ns : 0;
    pthread_mutex_unlock(&sub->lock);
    return batch;
}

/* A request came back (or failed): the next batch may go. */
static void request_over(struct tbc_submitter *sub, struct worker *w)
{
    pthread_mutex_lock(&sub->lock);
    assert(sub->in_flight > 0);
    sub->in_flight--;
    w->sent_at_ms = 0;
    sub->answered_at_ns = clock_monotonic_ns();
    pthread_cond_broadcast(&sub->work);
    pthread_mutex_unlock(&sub->lock);
}

static bool stopping(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    bool stop = sub->stopping;
    pthread_mutex_unlock(&sub->lock);
    return stop;
}

static void *worker_main(void *argument)
{
    struct worker *w = argument;
    struct tbc_submitter *sub = w->submitter;
    while (!stopping(sub)) {
        if (!w->ready) {
            int rc =
                tbc_session_ready(&w->session, clock_monotonic_ms() + 2 * TBC_CONNECT_TIMEOUT_MS);
            if (!w->session.in_flight)
                mark_stale(sub, w, false);
            set_state(sub, w, rc == TBC_SESSION_OK);
            if (rc != TBC_SESSION_OK) {
                struct timespec pause = {0, NOT_READY_PAUSE_MS * 1000000L};
                nanosleep(&pause, NULL);
                continue;
            }
        }
        uint8_t operation = 0;
        uint32_t events = 0;
        struct tbc_item *batch = next_batch(sub, w, &operation, &events);
        if (batch != NULL) {
            run_batch(sub, w, operation, batch, events);
        } else if (!tbc_session_alive(&w->session)) {
            set_state(sub, w, false); /* idle, and evicted or no replica connected */
        }
    }
    tbc_session_disconnect(&w->session);
    return NULL;
}

static void keepalive_done(struct tbc_item *item)
{
    struct tbc_submitter *sub = item->context;
    pthread_mutex_lock(&sub->lock);
    sub->keepalive_busy = false;
    pthread_mutex_unlock(&sub->lock);
}

/* Under the lock: a keepalive is due when nothing is out and nothing was
 * sent or answered for a while. A request still out (in flight, or stale:
 * its items gave up but it is resent) makes the cluster run expiry anyway
 * when it lands; a keepalive beside it would only queue at the primary,
 * where requests commit one after the other: with 0.15.3's ring-next
 * backup down each takes seconds, and a reserve behind a keepalive waited
 * for both (docs/tigerbeetle.md, "Several replicas"). */
static bool keepalive_due(struct tbc_submitter *sub, int64_t now_ms)
{
    if (sub->keepalive_busy || sub->sessions_ready == 0)
        return false;
    if (sub->in_flight > 0 || sub->stale_requests > 0)
        return false;
    int64_t answered_ms = sub->answered_at_ns / 1000000;
    if (now_ms - sub->last_request_ms < TBC_KEEPALIVE_MS || now_ms - answered_ms < TBC_KEEPALIVE_MS)
        return false;
    sub->keepalive_busy = true;
    return true;
}

static void *monitor_main(void *argument)
{
    struct tbc_submitter *sub = argument;
    pthread_mutex_lock(&sub->lock);
    while (!sub->stopping) {
        struct timespec until = clock_deadline(CLOCK_REALTIME, MONITOR_INTERVAL_MS * 1000);
        pthread_cond_timedwait(&sub->monitor_wake, &sub->lock, &until);
        if (sub->stopping)
            break;
        int64_t now = clock_monotonic_ms();
        struct tbc_item *overdue = unlink_overdue(sub, now, false);
        bool keepalive = keepalive_due(sub, now);
        pthread_mutex_unlock(&sub->lock);
        answer_list(overdue, TBC_ITEM_UNAVAILABLE);
        if (keepalive) {
            sub->keepalive.deadline_ms = now + TBC_ITEM_DEADLINE_MS;
            tbc_submitter_submit(sub, &sub->keepalive);
        }
        pthread_mutex_lock(&sub->lock);
    }
    pthread_mutex_unlock(&sub->lock);
    return NULL;
}

/* Checks an item's events before it is queued: every body is validated
 * before it is sent (docs/tigerbeetle-protocol.md, "Body validation"). 0, or the event's code in
 * the item. */
static int check_item(const struct tbc_submitter *sub, struct tbc_item *item)
{
    uint32_t limit = sub->batch_size_limit;
    if (item->event_count == 0 || item->event_count > tbc_body_events_max(item->operation, limit)) {
        item->invalid_index = 0;
        item->invalid_code = 0;
        return -1;
    }
    uint32_t size = item->event_count * tbc_body_event_size(item->operation);
    int rc = tbc_body_validate(item->operation, item->events, size, limit, sub->dialect,
                               &item->invalid_index, &item->invalid_code);
    return rc == TBC_BODY_OK ? 0 : -1;
}

void tbc_submitter_submit(struct tbc_submitter *sub, struct tbc_item *item)
{
    int q = queue_index(item->operation);
    assert(q >= 0);
    assert(item->done != NULL);
    assert(item->operation == TBC_OPERATION_LOOKUP_ACCOUNTS ||
           item->operation == TBC_OPERATION_LOOKUP_TRANSFERS || item->codes != NULL);
    item->next = NULL;
    if (check_item(sub, item) != 0) {
        item->status = TBC_ITEM_INVALID;
        item->done(item);
        return;
    }
    pthread_mutex_lock(&sub->lock);
    int64_t now = clock_monotonic_ms();
    if (sub->stopping || sub->queued_items >= TBC_QUEUE_ITEMS_MAX ||
        failing_fast(sub, now, item->patient)) {
        sub->stats.failed_items++;
        pthread_mutex_unlock(&sub->lock);
        item->status = TBC_ITEM_UNAVAILABLE;
        item->done(item);
        return;
    }
    item->sequence = ++sub->sequence;
    item->queued_at_ns = clock_monotonic_ns();
    sub->queued_events += item->event_count;
    struct queue *queue = &sub->queues[q];
    FIFO_PUSH(queue->head, queue->tail, item, next);
    sub->queued_items++;
    /* A lingering worker waits for a number of items: wake it only then
     * (one wake-up per batch instead of one per item). */
    if (sub->queued_items >= sub->wake_items || sub->queued_events >= TBC_EAGER_EVENTS)
        pthread_cond_signal(&sub->work);
    pthread_mutex_unlock(&sub->lock);
}

struct call_waiter {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
};

static void call_done(struct tbc_item *item)
{
    struct call_waiter *waiter = item->context;
    pthread_mutex_lock(&waiter->mutex);
    waiter->done = true;
    pthread_cond_signal(&waiter->cond);
    pthread_mutex_unlock(&waiter->mutex);
}

enum tbc_item_status tbc_submitter_call(struct tbc_submitter *sub, struct tbc_item *item)
{
    struct call_waiter waiter = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    item->done = call_done;
    item->context = &waiter;
    tbc_submitter_submit(sub, item);
    pthread_mutex_lock(&waiter.mutex);
    while (!waiter.done)
        pthread_cond_wait(&waiter.cond, &waiter.mutex);
    pthread_mutex_unlock(&waiter.mutex);
    pthread_cond_destroy(&waiter.cond);
    pthread_mutex_destroy(&waiter.mutex);
    return item->status;
}

static void init_keepalive(struct tbc_submitter *sub)
{
    /* A lookup of an id nobody uses: it finds nothing, and still makes the
     * server advance its clock and run expiry. */
    sub->keepalive_id = tbc_id_from_label("keepalive", 9);
    memset(&sub->keepalive, 0, sizeof sub->keepalive);
    sub->keepalive.operation = TBC_OPERATION_LOOKUP_ACCOUNTS;
    sub->keepalive.event_count = 1;
    sub->keepalive.events = &sub->keepalive_id;
    sub->keepalive.objects = sub->keepalive_object;
    sub->keepalive.found = &sub->keepalive_found;
    sub->keepalive.done = keepalive_done;
    sub->keepalive.context = sub;
}

static int start_threads(struct tbc_submitter *sub, char *error, size_t error_size)
{
    for (uint32_t i = 0; i < sub->worker_count; i++) {
        struct worker *w = &sub->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            snprintf(error, error_size, "tigerbeetle: cannot start session thread");
            return -1;
        }
        sub->workers_started++;
    }
    if (pthread_create(&sub->monitor, NULL, monitor_main, sub) != 0) {
        snprintf(error, error_size, "tigerbeetle: cannot start monitor thread");
        return -1;
    }
    sub->monitor_started = true;
    return 0;
}

int tbc_submitter_open(tbc_u128 cluster, const char *addresses, uint32_t sessions,
                       struct tbc_submitter **out, char *error, size_t error_size)
{
    if (sessions == 0 || sessions > TBC_SESSIONS_MAX) {
        snprintf(error, error_size, "tb-sessions: must be 1..%d", TBC_SESSIONS_MAX);
        return -1;
    }
    struct tbc_submitter *sub = calloc(1, sizeof *sub + sessions * sizeof(struct worker));
    if (sub == NULL) {
        snprintf(error, error_size, "tigerbeetle: out of memory");
        return -1;
    }
    int count = tbc_addresses_parse(addresses, sub->addresses, error, error_size);
    if (count < 0) {
        free(sub);
        return -1;
    }
    sub->address_count = (uint32_t)count;
    sub->cluster = cluster;
    sub->worker_count = sessions;
    sub->dialect = TBC_DIALECT_0_15;
    sub->batch_size_limit = TBC_BODY_SIZE_MAX;
    sub->last_reachable_ms = clock_monotonic_ms(); /* give the first connect a chance */
    pthread_mutex_init(&sub->lock, NULL);
    pthread_cond_init(&sub->work, NULL);
    pthread_cond_init(&sub->monitor_wake, NULL);
    init_keepalive(sub);
    for (uint32_t i = 0; i < sessions; i++) {
        sub->workers[i].submitter = sub;
        if (tbc_session_init(&sub->workers[i].session, cluster, sub->addresses,
                             sub->address_count) != 0) {
            snprintf(error, error_size, "tigerbeetle: out of memory for session buffers");
            tbc_submitter_close(sub);
            return -1;
        }
    }
    if (start_threads(sub, error, error_size) != 0) {
        tbc_submitter_close(sub);
        return -1;
    }
    *out = sub;
    return 0;
}

void tbc_submitter_close(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    sub->stopping = true;
    pthread_cond_broadcast(&sub->work);
    pthread_cond_broadcast(&sub->monitor_wake);
    pthread_mutex_unlock(&sub->lock);
    for (uint32_t i = 0; i < sub->workers_started; i++)
        pthread_join(sub->workers[i].thread, NULL);
    if (sub->monitor_started)
        pthread_join(sub->monitor, NULL);
    pthread_mutex_lock(&sub->lock);
    struct tbc_item *left = unlink_overdue(sub, INT64_MAX, true);
    pthread_mutex_unlock(&sub->lock);
    answer_list(left, TBC_ITEM_UNAVAILABLE);
    for (uint32_t i = 0; i < sub->worker_count; i++)
        tbc_session_free(&sub->workers[i].session);
    pthread_cond_destroy(&sub->work);
    pthread_cond_destroy(&sub->monitor_wake);
    pthread_mutex_destroy(&sub->lock);
    free(sub);
}

uint32_t tbc_submitter_events_max(struct tbc_submitter *sub, uint8_t operation)
{
    pthread_mutex_lock(&sub->lock);
    uint32_t limit = sub->batch_size_limit;
    pthread_mutex_unlock(&sub->lock);
    return tbc_body_events_max(operation, limit);
}

bool tbc_submitter_ready(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    bool ready = sub->sessions_ready > 0;
    pthread_mutex_unlock(&sub->lock);
    return ready;
}

enum tbc_dialect tbc_submitter_dialect(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    enum tbc_dialect dialect = sub->dialect;
    pthread_mutex_unlock(&sub->lock);
    return dialect;
}

uint32_t tbc_submitter_stale_requests(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    uint32_t stale = sub->stale_requests;
    pthread_mutex_unlock(&sub->lock);
    return stale;
}

uint64_t tbc_submitter_cluster_time_ns(struct tbc_submitter *sub)
{
    pthread_mutex_lock(&sub->lock);
    uint64_t at = sub->cluster_time_ns;
    int64_t since = clock_monotonic_ns() - sub->cluster_time_at_ns;
    pthread_mutex_unlock(&sub->lock);
    return at == 0 ? 0 : at + (uint64_t)(since > 0 ? since : 0);
}

void tbc_submitter_stats(struct tbc_submitter *sub, struct tbc_submitter_stats *out)
{
    pthread_mutex_lock(&sub->lock);
    *out = sub->stats;
    out->sessions_ready = sub->sessions_ready;
    out->server_release = sub->server_release;
    out->view = sub->view;
    for (uint32_t i = 0; i < sub->worker_count; i++) {
        /* Written by the session's thread with atomic adds. */
        const struct tbc_session_stats *s = &sub->workers[i].session.stats;
        out->retransmissions += __atomic_load_n(&s->retransmissions, __ATOMIC_RELAXED);
        out->connections += __atomic_load_n(&s->connections, __ATOMIC_RELAXED);
        out->evictions += __atomic_load_n(&s->evictions, __ATOMIC_RELAXED);
        out->registrations += __atomic_load_n(&s->registrations, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&sub->lock);
}
