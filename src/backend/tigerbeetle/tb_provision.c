/* Blocking admin conversations with the cluster (see tb_provision.h).
 *
 * Capacity changes must be idempotent across front ends: two llmlimitd
 * applying the same definition at once must move capacity once. Each
 * change is a transfer whose id names the capacity seen, the target and an
 * attempt number k ("xfer:capacity:<key>/<from>-><to>/<k>"): front ends
 * that see the same capacity make the same id, so one wins and the other
 * gets "exists". An id can also exist from an earlier change with the same
 * numbers, or be burnt by a failure (0.17 id_already_failed); either way
 * the balance did not move, so the capacity is read again and k advances.
 * Whoever sees a later capacity makes a different id: nothing applies
 * twice. */
#include "tb_provision.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "tbclient/tbc_ids.h"

/* Attempts of one capacity change within one call (k advances past ids
 * used before). */
#define CAPACITY_ATTEMPTS_MAX 64
/* A budget's next period is provisioned this long before it starts. */
#define BUDGET_PREPARE_MS (60 * 1000)

static _Thread_local bool impatient;

void tb_provision_patience(bool patient)
{
    impatient = !patient;
}

static void log_code(const char *what, const struct tb_limit *limit, uint32_t code)
{
    fprintf(stderr, "tigerbeetle: %s for limit %s failed with result %u\n", what, limit->key, code);
}

/* Submits an admin request (a handful of events) and waits for it; a cluster
 * still starting is worth waiting for unless told otherwise. */
static int admin_call(struct tb_backend *b, struct tbc_item *item)
{
    assert(item->event_count >= 1);
    assert(item->event_count <= 4);
    item->deadline_ms = clock_monotonic_ms() + TB_ADMIN_DEADLINE_MS;
    item->patient = !impatient;
    return tbc_submitter_call(b->submitter, item) == TBC_ITEM_OK ? 0 : -1;
}

static int call_create(struct tb_backend *b, uint8_t operation, const void *events, uint32_t count,
                       uint32_t *codes)
{
    struct tbc_item item = {
        .operation = operation, .event_count = count, .events = events, .codes = codes};
    return admin_call(b, &item);
}

static int call_lookup(struct tb_backend *b, const tbc_u128 *ids, uint32_t count,
                       struct tbc_account *accounts, uint8_t *found)
{
    assert(count <= 3);
    struct tbc_item item = {.operation = TBC_OPERATION_LOOKUP_ACCOUNTS,
                            .event_count = count,
                            .events = ids,
                            .objects = accounts,
                            .found = found};
    return admin_call(b, &item);
}

/* Creates accounts; "exists" is success (every front end creates them). */
static int create_accounts(struct tb_backend *b, const struct tb_limit *limit,
                           const struct tbc_account *accounts, uint32_t count)
{
    uint32_t codes[4];
    assert(count <= sizeof codes / sizeof codes[0]);
    if (call_create(b, TBC_OPERATION_CREATE_ACCOUNTS, accounts, count, codes) != 0)
        return -1;
    for (uint32_t i = 0; i < count; i++) {
        if (codes[i] != TBC_ACCOUNT_OK && codes[i] != TBC_ACCOUNT_EXISTS) {
            log_code("creating an account", limit, codes[i]);
            return -1;
        }
    }
    return 0;
}

/* The operator account also fixes the cluster's id scheme (enum
 * tb_id_scheme): a new one is made marked for time-ordered ids; one an
 * older llmlimitd made, unmarked, answers "exists with a different
 * user_data_32" and keeps the ids it has. An older llmlimitd meeting a
 * marked one fails here the same way, and serves nothing rather than
 * ids that do not match. */
int tb_provision_operator(struct tb_backend *b)
{
    if (__atomic_load_n(&b->operator_created, __ATOMIC_ACQUIRE))
        return 0;
    struct tbc_account accounts[2] = {
        tb_ledger_account(b->operator_id, TB_ACCOUNT_CODE_OPERATOR, 0, NULL),
        tb_ledger_account(b->finalized_id, TB_ACCOUNT_CODE_FINALIZED, 0, NULL),
    };
    accounts[0].user_data_32 = TB_OPERATOR_TIME_ORDERED_IDS;
    uint32_t codes[2] = {0, 0};
    if (call_create(b, TBC_OPERATION_CREATE_ACCOUNTS, accounts, 2, codes) != 0)
        return -1;
    uint8_t scheme = TB_IDS_TIME_ORDERED;
    if (codes[0] == TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_USER_DATA_32) {
        scheme = TB_IDS_LABELS;
        codes[0] = TBC_ACCOUNT_EXISTS;
    }
    for (uint32_t i = 0; i < 2; i++) {
        if (codes[i] != TBC_ACCOUNT_OK && codes[i] != TBC_ACCOUNT_EXISTS) {
            fprintf(stderr, "tigerbeetle: creating the operator accounts failed with result %u\n",
                    codes[i]);
            return -1;
        }
    }
    __atomic_store_n(&b->id_scheme, scheme, __ATOMIC_RELEASE);
    __atomic_store_n(&b->operator_created, true, __ATOMIC_RELEASE);
    return 0;
}

int tb_provision_claim(struct backend *base, const uint8_t name[32], const uint8_t owner[16],
                       bool *mine)
{
    struct tb_backend *b = tb_backend_of(base);
    if (tb_provision_operator(b) != 0)
        return -1;
    tbc_u128 id;
    memcpy(&id, name, sizeof id);
    struct tbc_account account =
        tb_ledger_account(tbc_id_normalize(id), TB_ACCOUNT_CODE_ALERT_CLAIM, 0, NULL);
    memcpy(&account.user_data_128, owner, sizeof account.user_data_128);
    uint32_t code = 0;
    if (call_create(b, TBC_OPERATION_CREATE_ACCOUNTS, &account, 1, &code) != 0)
        return -1;
    if (code == TBC_ACCOUNT_OK || code == TBC_ACCOUNT_EXISTS) {
        *mine = true;
        return 0;
    }
    if (code == TBC_ACCOUNT_EXISTS_WITH_DIFFERENT_USER_DATA_128) {
        *mine = false;
        return 0;
    }
    fprintf(stderr, "tigerbeetle: claiming an alert failed with result %u\n", code);
    return -1;
}

static int create_limit_accounts(struct tb_backend *b, const struct tb_limit *limit,
                                 enum limit_kind kind)
{
    struct tbc_account accounts[3];
    accounts[0] = tb_ledger_account(tb_limit_gate(limit, (uint8_t)kind), TB_ACCOUNT_CODE_LIMIT,
                                    TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS, limit);
    if (kind != LIMIT_ROLLING)
        return create_accounts(b, limit, accounts, 1);
    accounts[1] = tb_ledger_account(limit->used_id, TB_ACCOUNT_CODE_USED, 0, limit);
    accounts[2] = tb_ledger_account(limit->debt_id, TB_ACCOUNT_CODE_DEBT, 0, limit);
    return create_accounts(b, limit, accounts, 3);
}

static int create_period_accounts(struct tb_backend *b, const struct tb_limit *limit,
                                  const struct tb_period_accounts *period)
{
    struct tbc_account accounts[3] = {
        tb_ledger_account(period->gate, TB_ACCOUNT_CODE_BUDGET,
                          TBC_ACCOUNT_DEBITS_MUST_NOT_EXCEED_CREDITS, limit),
        tb_ledger_account(period->spend, TB_ACCOUNT_CODE_SPEND,
                          TBC_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS, limit),
        tb_ledger_account(period->cut, TB_ACCOUNT_CODE_CUT,
                          TBC_ACCOUNT_CREDITS_MUST_NOT_EXCEED_DEBITS, limit),
    };
    return create_accounts(b, limit, accounts, 3);
}

static tbc_u128 capacity_id(const char *prefix, const struct tb_limit *limit, int64_t period_ms,
                            uint64_t from, uint64_t to, uint32_t attempt)
{
    char label[LIMIT_KEY_LENGTH_MAX + 128];
    int n;
    if (period_ms == INT64_MIN)
        n = snprintf(label, sizeof label, "%s%s/%" PRIu64 "->%" PRIu64 "/%u", prefix, limit->key,
                     from, to, attempt);
    else
        n = snprintf(label, sizeof label, "%s%" PRId64 ":%s/%" PRIu64 "->%" PRIu64 "/%u", prefix,
                     period_ms, limit->key, from, to, attempt);
    /* A cut label would give two different changes the same id. */
    assert(n > 0);
    assert((size_t)n < sizeof label);
    return tbc_id_from_label(label, (size_t)n);
}

static uint32_t next_attempt(struct tb_backend *b, struct tb_limit *limit, bool advance)
{
    pthread_rwlock_wrlock(&b->registry_lock);
    if (advance)
        limit->decrease_attempt++;
    uint32_t attempt = limit->decrease_attempt;
    pthread_rwlock_unlock(&b->registry_lock);
    return attempt;
}

/* Moves a rolling/concurrency limit account's capacity toward target:
 * a top-up always applies; a decrease only when the free capacity covers
 * it. *in_force gets the capacity the cluster now holds. 0, or -1 when
 * the cluster did not answer (or the account is missing). */
static int set_gate_capacity(struct tb_backend *b, struct tb_limit *limit, enum limit_kind kind,
                             uint64_t target, uint64_t *in_force)
{
    assert(kind == LIMIT_ROLLING || kind == LIMIT_CONCURRENCY);
    assert(target >= 1);
    assert(target <= AMOUNT_MAX);
    tbc_u128 gate_id = tb_limit_gate(limit, (uint8_t)kind);
    const char *prefix =
        kind == LIMIT_CONCURRENCY ? "xfer:capacity:concurrency:" : "xfer:capacity:rolling:";
    bool advance = false;
    for (int round = 0; round < CAPACITY_ATTEMPTS_MAX; round++) {
        struct tbc_account gate;
        uint8_t found = 0;
        if (call_lookup(b, &gate_id, 1, &gate, &found) != 0 || !found)
            return -1;
        uint64_t capacity = tb_ledger_capacity(&gate);
        *in_force = capacity;
        if (capacity == target)
            return 0;
        uint32_t attempt = next_attempt(b, limit, advance);
        struct tbc_transfer change;
        if (capacity < target) {
            change =
                tb_ledger_transfer(capacity_id(prefix, limit, INT64_MIN, capacity, target, attempt),
                                   b->operator_id, gate_id, target - capacity, TB_CODE_CAPACITY, 0);
        } else {
            uint64_t delta = capacity - target;
            if (tb_ledger_available(&gate) < (int64_t)delta)
                return 0; /* not free yet: the limit stays decreasing */
            change =
                tb_ledger_transfer(capacity_id(prefix, limit, INT64_MIN, capacity, target, attempt),
                                   gate_id, b->operator_id, delta, TB_CODE_CAPACITY, 0);
        }
        uint32_t code = 0;
        if (call_create(b, TBC_OPERATION_CREATE_TRANSFERS, &change, 1, &code) != 0)
            return -1;
        if (code == TBC_TRANSFER_OK) {
            *in_force = target;
            return 0;
        }
        if (code == TBC_TRANSFER_EXCEEDS_CREDITS)
            return 0; /* taken in the meantime: try again later */
        if (code != TBC_TRANSFER_EXISTS && code != TBC_TRANSFER_ID_ALREADY_FAILED &&
            !tbc_transfer_result_exists_different(code)) {
            log_code("a capacity change", limit, code);
            return -1;
        }
        advance = true; /* that id was used before: read again, next k */
    }
    return -1;
}

/* A budget period's capacity in force: its top-ups less its cuts. */
static int period_capacity(struct tb_backend *b, const struct tb_period_accounts *period,
                           uint64_t *capacity, uint64_t *cut_owed)
{
    tbc_u128 ids[2] = {period->gate, period->cut};
    struct tbc_account accounts[2];
    uint8_t found[2] = {0, 0};
    if (call_lookup(b, ids, 2, accounts, found) != 0 || !found[0] || !found[1])
        return -1;
    uint64_t cuts = tbc_u128_saturate(accounts[1].debits_posted);
    uint64_t credits = tbc_u128_saturate(accounts[0].credits_posted);
    *capacity = credits > cuts ? credits - cuts : 0;
    *cut_owed = tb_ledger_owed(&accounts[1]);
    return 0;
}

/* Marks a budget period as one that may owe a cut: reserves then pay
 * the gate's free capacity into the cut before taking any (tb_reserve.c
 * build_chain), so a hold that expires later frees capacity for the cut,
 * not for the next reserve. Maintenance clears the mark once nothing is
 * owed (tb_provision_settle). */
static void mark_may_owe(struct tb_backend *b, struct tb_limit *limit, int64_t period_ms)
{
    pthread_rwlock_wrlock(&b->registry_lock);
    limit->budget_owes_ms = period_ms;
    pthread_rwlock_unlock(&b->registry_lock);
}

/* Sets a budget period's capacity (a decrease applies at once: what the
 * holds and spend do not leave free is owed, docs/semantics.md). 0 or -1. */
static int set_period_capacity(struct tb_backend *b, struct tb_limit *limit, int64_t period_ms,
                               uint64_t target)
{
    struct tb_period_accounts period;
    tb_ledger_period_accounts(limit, period_ms, &period);
    bool advance = false;
    for (int round = 0; round < CAPACITY_ATTEMPTS_MAX; round++) {
        uint64_t capacity, cut_owed;
        if (period_capacity(b, &period, &capacity, &cut_owed) != 0)
            return -1;
        struct tbc_transfer events[2];
        uint32_t count = 0;
        uint32_t attempt = next_attempt(b, limit, advance);
        if (capacity < target)
            events[count++] = tb_ledger_transfer(
                capacity_id("xfer:capacity:", limit, period_ms, capacity, target, attempt),
                b->operator_id, period.gate, target - capacity, TB_CODE_CAPACITY, 0);
        else if (capacity > target)
            events[count++] = tb_ledger_transfer(
                capacity_id("xfer:cut:", limit, period_ms, capacity, target, attempt), period.cut,
                b->operator_id, capacity - target, TB_CODE_CUT, 0);
        else if (cut_owed == 0)
            return 0;
        if (capacity > target || cut_owed > 0)
            mark_may_owe(b, limit, period_ms); /* before the cut: no reserve may miss it */
        events[count++] = tb_ledger_settle(tbc_id_random(), period.gate, period.cut);
        assert(count <= sizeof events / sizeof events[0]);
        uint32_t codes[2];
        if (call_create(b, TBC_OPERATION_CREATE_TRANSFERS, events, count, codes) != 0)
            return -1;
        if (count == 1 || codes[0] == TBC_TRANSFER_OK)
            return 0; /* the settle may find nothing to move: not an error */
        if (codes[0] != TBC_TRANSFER_EXISTS && codes[0] != TBC_TRANSFER_ID_ALREADY_FAILED &&
            !tbc_transfer_result_exists_different(codes[0])) {
            log_code("a budget capacity change", limit, codes[0]);
            return -1;
        }
        advance = true;
    }
    return -1;
}

/* Accounts and capacity of one budget period; marks it provisioned. */
static int provision_period(struct tb_backend *b, struct tb_limit *limit, int64_t period_ms,
                            uint64_t capacity)
{
    struct tb_period_accounts period;
    tb_ledger_period_accounts(limit, period_ms, &period);
    if (create_period_accounts(b, limit, &period) != 0 ||
        set_period_capacity(b, limit, period_ms, capacity) != 0)
        return -1;
    pthread_rwlock_wrlock(&b->registry_lock);
    tb_limit_period_mark(limit, period_ms);
    pthread_rwlock_unlock(&b->registry_lock);
    return 0;
}

static struct limit_state snapshot(struct tb_backend *b, struct tb_limit *limit, bool *provisioned)
{
    pthread_rwlock_rdlock(&b->registry_lock);
    struct limit_state state = limit->state;
    if (provisioned != NULL)
        *provisioned = limit->provisioned;
    pthread_rwlock_unlock(&b->registry_lock);
    return state;
}

static void set_provisioned(struct tb_backend *b, struct tb_limit *limit, bool provisioned)
{
    pthread_rwlock_wrlock(&b->registry_lock);
    limit->provisioned = provisioned;
    if (!provisioned)
        __atomic_store_n(&b->provision_wanted, true, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&b->registry_lock);
}

/* The state after asking for `target` when the cluster holds in_force. */
static void state_for(struct limit_state *state, const struct limit_definition *d,
                      uint64_t in_force)
{
    state->definition = *d;
    state->status = LIMIT_ACTIVE;
    state->pending_decrease_to = 0;
    if (in_force > d->capacity) {
        state->definition.capacity = in_force;
        state->status = LIMIT_DECREASING;
        state->pending_decrease_to = d->capacity;
    }
    /* A budget decrease applies at once: never decreasing. */
    assert(state->status == LIMIT_ACTIVE || d->kind != LIMIT_BUDGET);
}

void tb_provision_apply(struct tb_backend *b, struct tb_limit *limit,
                        const struct limit_state *before, const struct limit_definition *d,
                        int64_t now_ms, struct limit_state *after)
{
    uint64_t in_force = d->capacity;
    int rc = tb_provision_operator(b);
    if (d->kind == LIMIT_BUDGET) {
        /* A budget decrease applies at once (remaining may go negative). */
        if (rc == 0)
            rc = provision_period(b, limit, period_span_at(d, now_ms).start_ms, d->capacity);
    } else {
        if (rc == 0)
            rc = create_limit_accounts(b, limit, d->kind);
        if (rc == 0)
            rc = set_gate_capacity(b, limit, d->kind, d->capacity, &in_force);
        if (rc != 0 && before != NULL && d->capacity < before->definition.capacity)
            in_force = before->definition.capacity; /* wait as decreasing */
    }
    state_for(after, d, in_force);
    set_provisioned(b, limit, rc == 0);
}

bool tb_provision_limit(struct tb_backend *b, struct tb_limit *limit, int64_t now_ms)
{
    bool provisioned;
    struct limit_state state = snapshot(b, limit, &provisioned);
    if (provisioned)
        return false;
    if (tb_provision_operator(b) != 0)
        return false;
    if (state.definition.kind == LIMIT_BUDGET) {
        int64_t period_ms = period_span_at(&state.definition, now_ms).start_ms;
        if (provision_period(b, limit, period_ms, state.definition.capacity) == 0)
            set_provisioned(b, limit, true);
        return false;
    }
    uint64_t in_force;
    if (create_limit_accounts(b, limit, state.definition.kind) != 0 ||
        set_gate_capacity(b, limit, state.definition.kind, state.definition.capacity, &in_force) !=
            0)
        return false;
    bool changed = false;
    pthread_rwlock_wrlock(&b->registry_lock);
    if (in_force > limit->state.definition.capacity) {
        /* The cluster holds more than we say and cannot give it back yet. */
        uint64_t wanted = limit->state.status == LIMIT_DECREASING
                              ? limit->state.pending_decrease_to
                              : limit->state.definition.capacity;
        limit->state.definition.capacity = in_force;
        limit->state.status = LIMIT_DECREASING;
        limit->state.pending_decrease_to = wanted;
        assert(wanted >= 1);
        assert(wanted < in_force);
        changed = true;
    }
    limit->provisioned = true;
    pthread_rwlock_unlock(&b->registry_lock);
    return changed;
}

void tb_provision_budget_period(struct tb_backend *b, struct tb_limit *limit, int64_t now_ms)
{
    bool provisioned;
    struct limit_state state = snapshot(b, limit, &provisioned);
    if (!provisioned || state.definition.kind != LIMIT_BUDGET)
        return;
    struct period_span span = period_span_at(&state.definition, now_ms);
    int64_t periods[2] = {span.start_ms, span.end_ms};
    int count = now_ms + BUDGET_PREPARE_MS >= periods[1] ? 2 : 1;
    for (int i = 0; i < count; i++) {
        pthread_rwlock_rdlock(&b->registry_lock);
        bool ready = tb_limit_period_ready(limit, periods[i]);
        pthread_rwlock_unlock(&b->registry_lock);
        if (!ready)
            provision_period(b, limit, periods[i], state.definition.capacity);
    }
}

bool tb_provision_decrease(struct tb_backend *b, struct tb_limit *limit)
{
    bool provisioned;
    struct limit_state state = snapshot(b, limit, &provisioned);
    if (!provisioned || state.status != LIMIT_DECREASING)
        return false;
    uint64_t in_force;
    if (set_gate_capacity(b, limit, state.definition.kind, state.pending_decrease_to, &in_force) !=
            0 ||
        in_force != state.pending_decrease_to)
        return false;
    bool changed = false;
    pthread_rwlock_wrlock(&b->registry_lock);
    /* Unless a put changed it in the meantime (it holds the admin lock, so
     * it cannot have). */
    if (limit->state.status == LIMIT_DECREASING &&
        limit->state.pending_decrease_to == state.pending_decrease_to) {
        limit->state.definition.capacity = in_force;
        limit->state.status = LIMIT_ACTIVE;
        limit->state.pending_decrease_to = 0;
        changed = true;
    }
    pthread_rwlock_unlock(&b->registry_lock);
    return changed;
}

void tb_provision_settle(struct tb_backend *b, struct tb_limit *limit, int64_t period_ms)
{
    struct tb_period_accounts period;
    tb_ledger_period_accounts(limit, period_ms, &period);
    tbc_u128 ids[2] = {period.spend, period.cut};
    struct tbc_account accounts[2];
    uint8_t found[2] = {0, 0};
    if (call_lookup(b, ids, 2, accounts, found) != 0 || !found[0] || !found[1])
        return;
    bool owes = tb_ledger_owed(&accounts[0]) > 0 || tb_ledger_owed(&accounts[1]) > 0;
    if (owes) {
        /* Capacity freed by expiry pays what is owed (cut first). */
        struct tbc_transfer events[2] = {
            tb_ledger_settle(tbc_id_random(), period.gate, period.cut),
            tb_ledger_settle(tbc_id_random(), period.gate, period.spend)};
        uint32_t codes[2];
        call_create(b, TBC_OPERATION_CREATE_TRANSFERS, events, 2, codes);
    }
    pthread_rwlock_wrlock(&b->registry_lock);
    if (owes)
        limit->budget_owes_ms = period_ms;
    else if (limit->budget_owes_ms == period_ms)
        limit->budget_owes_ms = INT64_MIN;
    pthread_rwlock_unlock(&b->registry_lock);
}

uint32_t tb_provision_balance_ids(const struct tb_limit *limit, enum limit_kind kind,
                                  int64_t period_ms, tbc_u128 *ids)
{
    if (kind == LIMIT_ROLLING) {
        ids[0] = tb_limit_gate(limit, (uint8_t)kind);
        ids[1] = limit->used_id;
        ids[2] = limit->debt_id;
        return 3;
    }
    if (kind == LIMIT_BUDGET) {
        struct tb_period_accounts period;
        tb_ledger_period_accounts(limit, period_ms, &period);
        ids[0] = period.gate;
        ids[1] = period.spend;
        return 2;
    }
    ids[0] = tb_limit_gate(limit, (uint8_t)kind);
    return 1;
}

void tb_provision_balances_of(enum limit_kind kind, const struct tbc_account *accounts,
                              const uint8_t *found, struct tb_balances *out)
{
    memset(out, 0, sizeof *out);
    uint64_t pending = found[0] ? tbc_u128_saturate(accounts[0].debits_pending) : 0;
    if (kind == LIMIT_ROLLING) {
        /* Completed leases hold their re-reserve on the limit account and
         * the same amount on the used account. */
        out->used = found[1] ? tbc_u128_saturate(accounts[1].debits_pending) : 0;
        out->reserved = pending > out->used ? pending - out->used : 0;
        out->debt = found[2] ? tbc_u128_saturate(accounts[2].debits_pending) : 0;
    } else if (kind == LIMIT_BUDGET) {
        out->reserved = pending;
        if (found[1]) { /* spend paid from capacity is used, the rest debt */
            out->used = tbc_u128_saturate(accounts[1].credits_posted);
            out->debt = tb_ledger_owed(&accounts[1]);
        }
    } else {
        out->reserved = pending;
    }
}

int tb_provision_balances(struct tb_backend *b, struct tb_limit *limit, enum limit_kind kind,
                          int64_t period_ms, struct tb_balances *out)
{
    memset(out, 0, sizeof *out);
    tbc_u128 ids[TB_BALANCE_ACCOUNTS_MAX];
    uint32_t count = tb_provision_balance_ids(limit, kind, period_ms, ids);
    struct tbc_account accounts[TB_BALANCE_ACCOUNTS_MAX];
    uint8_t found[TB_BALANCE_ACCOUNTS_MAX] = {0, 0, 0};
    if (call_lookup(b, ids, count, accounts, found) != 0)
        return -1;
    tb_provision_balances_of(kind, accounts, found, out);
    return 0;
}
