/* The admin side of the tigerbeetle backend, in blocking conversations with
 * the cluster (docs/tigerbeetle.md "Capacity changes"): creating a limit's
 * accounts, bringing its capacity in the cluster to the definition's (top-up,
 * decrease, budget cut), the decrease state machine, budget settling, and
 * reading balances for usage. Runs on admin threads and the maintenance
 * thread, never on the data path. */
#ifndef LLMLIMIT_TB_PROVISION_H
#define LLMLIMIT_TB_PROVISION_H

#include <stdbool.h>
#include <stdint.h>

#include "tb_backend.h"

struct tb_balances {
    uint64_t reserved;
    uint64_t used;
    uint64_t debt;
};

/* Balances of a limit (for a budget: of the period starting at period_ms).
 * 0, or -1 when the cluster did not answer. */
int tb_provision_balances(struct tb_backend *b, struct tb_limit *limit, enum limit_kind kind,
                          int64_t period_ms, struct tb_balances *out);
/* The same in two halves, for a caller that looks up many limits at once
 * (tb_usage.c): the accounts a limit's balances are read from (1..
 * TB_BALANCE_ACCOUNTS_MAX written to ids, their count returned), then the
 * balances from those accounts as looked up (found[i]: accounts[i] exists;
 * one not found holds nothing). */
#define TB_BALANCE_ACCOUNTS_MAX 3
uint32_t tb_provision_balance_ids(const struct tb_limit *limit, enum limit_kind kind,
                                  int64_t period_ms, tbc_u128 *ids);
void tb_provision_balances_of(enum limit_kind kind, const struct tbc_account *accounts,
                              const uint8_t *found, struct tb_balances *out);

/* A put: makes the cluster hold `definition`'s capacity where it can and
 * writes the resulting state (active, or decreasing with the capacity in
 * force). before is the state in force, NULL for a limit new to this
 * process. When the cluster does not answer, the state is what was asked
 * (a decrease waits as decreasing) and the maintenance thread finishes. */
void tb_provision_apply(struct tb_backend *b, struct tb_limit *limit,
                        const struct limit_state *before, const struct limit_definition *definition,
                        int64_t now_ms, struct limit_state *after);

/* Maintenance. Each returns true when the limit's state changed. */
/* An unprovisioned limit (restored at start, or put while the cluster was
 * away): accounts and capacity as its state says. */
bool tb_provision_limit(struct tb_backend *b, struct tb_limit *limit, int64_t now_ms);
/* A budget's period of now (and the next one when it is close). */
void tb_provision_budget_period(struct tb_backend *b, struct tb_limit *limit, int64_t now_ms);
/* A decreasing limit: applies the decrease once the free capacity covers it. */
bool tb_provision_decrease(struct tb_backend *b, struct tb_limit *limit);
/* A budget period that may owe (debt, cut): lets free capacity pay it. */
void tb_provision_settle(struct tb_backend *b, struct tb_limit *limit, int64_t period_ms);

/* Whether this thread's calls wait for a session while none is connected
 * (the maintenance thread and puts: yes; tick(): no, it must not block). */
void tb_provision_patience(bool patient);

/* The operator account, once per process. 0 or -1. */
int tb_provision_operator(struct tb_backend *b);

/* backend_ops.claim: an account whose id is the name's first 16 bytes and
 * whose user_data_128 is the owner; "exists" with the same owner is the
 * owner's claim again, with another owner someone else's. */
int tb_provision_claim(struct backend *base, const uint8_t name[32], const uint8_t owner[16],
                       bool *mine);

#endif
