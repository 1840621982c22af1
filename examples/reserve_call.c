/* Example: guarding one LLM call with libllmlimit. Reserves a request, the
 * estimated tokens and the estimated cost on three limits at once, makes
 * the call, then reports what it really used (or releases the lease if the
 * call never happened).
 *
 *   cc reserve_call.c $(pkg-config --cflags --libs llmlimit) -o reserve_call
 *   LLMLIMIT_URL=http://127.0.0.1:8470 ./reserve_call RPM_KEY TPM_KEY BUDGET_KEY */
#include <stdio.h>
#include <stdlib.h>

#include <llmlimit.h>

/* Stands in for the provider call: returns 0 and the tokens it used. */
static int call_model(uint64_t max_tokens, uint64_t *tokens_used)
{
    *tokens_used = max_tokens * 3 / 4;
    return 0;
}

static uint64_t cost_usd_micros(uint64_t tokens)
{
    return tokens * 5; /* $5 per million tokens */
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s RPM_KEY TPM_KEY BUDGET_KEY\n", argv[0]);
        return 2;
    }
    const char *url = getenv("LLMLIMIT_URL");
    struct llmlimit_client *client;
    int rc = llmlimit_client_new(url ? url : "http://127.0.0.1:8470", getenv("LLMLIMIT_TOKEN"),
                                 NULL, &client);
    if (rc != 0) {
        fprintf(stderr, "client: %s\n", llmlimit_strerror(rc));
        return 1;
    }
    const uint64_t max_tokens = 1000;
    struct llmlimit_requirement requirements[3] = {
        {argv[1], 1},                           /* one request */
        {argv[2], max_tokens},                  /* at most this many tokens */
        {argv[3], cost_usd_micros(max_tokens)}, /* and what they would cost */
    };
    struct llmlimit_reserve_request request = {
        .requirements = requirements, .requirement_count = 3, .caller = "example"};
    struct llmlimit_reserve_result lease;
    struct llmlimit_status status;
    /* Wait up to 5 s for capacity; a new lease id is used after each denial. */
    rc = llmlimit_acquire(client, &request, 5000, &lease, &status);
    if (rc != 0) {
        fprintf(stderr, "not allowed: %s %s\n", llmlimit_strerror(rc),
                lease.error[0] ? lease.error : status.error);
        llmlimit_client_free(client);
        return 1;
    }
    printf("allowed: lease %s\n", lease.lease_id);

    uint64_t tokens_used;
    if (call_model(max_tokens, &tokens_used) != 0) {
        /* The call never happened: give the capacity back. */
        llmlimit_release(client, lease.lease_id, 0, NULL);
        llmlimit_client_free(client);
        return 1;
    }
    struct llmlimit_actual actuals[2] = {
        {argv[2], tokens_used},
        {argv[3], cost_usd_micros(tokens_used)},
    }; /* the request count is settled as reserved */
    struct llmlimit_complete_request complete = {lease.lease_id, actuals, 2};
    struct llmlimit_complete_result result;
    rc = llmlimit_complete(client, &complete, 0, &result, &status);
    if (rc != 0)
        /* Best effort: the holds expire by themselves; nothing to undo. */
        fprintf(stderr, "complete: %s (%s)\n", llmlimit_strerror(rc), status.error);
    else
        printf("completed: %llu tokens, reconciled %s, %zu warning(s)\n",
               (unsigned long long)tokens_used, result.reconciled ? "yes" : "no",
               result.warning_count);
    llmlimit_complete_result_clear(&result);
    llmlimit_client_free(client);
    return rc == 0 ? 0 : 1;
}
