/* The gateway's figures per (model, caller): calls, denials, upstream
 * errors, tokens and cost as settled, and upstream latency to the first
 * byte. A bounded set of series (GATEWAY_STATS_SERIES_MAX), the rest counted
 * under model="other", caller="other"; and MCP tool calls per (server,
 * tool) the same way (GATEWAY_MCP_STATS_SERIES_MAX). One mutex, held for a
 * few adds. */
#include "gateway_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Upper bounds of the latency buckets, in microseconds. */
static const int64_t latency_bounds_us[GATEWAY_LATENCY_BUCKETS] = {
    500,    1000,   2500,   5000,    10000,   25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};
static const char *const latency_labels[GATEWAY_LATENCY_BUCKETS] = {
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1",    "0.25",  "0.5",    "1",     "2.5",  "5",     "10"};

int gateway_stats_init(struct gateway_stats *stats)
{
    stats->series = calloc(GATEWAY_STATS_SERIES_MAX + 1, sizeof *stats->series);
    if (stats->series == NULL)
        return -1;
    struct gateway_stats_series *other = &stats->series[GATEWAY_STATS_SERIES_MAX];
    memcpy(other->model, "other", sizeof "other");
    memcpy(other->caller, "other", sizeof "other");
    stats->count = 0;
    stats->mcp = calloc(GATEWAY_MCP_STATS_SERIES_MAX + 1, sizeof *stats->mcp);
    if (stats->mcp == NULL) {
        free(stats->series);
        stats->series = NULL;
        return -1;
    }
    struct gateway_mcp_series *tools_other = &stats->mcp[GATEWAY_MCP_STATS_SERIES_MAX];
    memcpy(tools_other->server, "other", sizeof "other");
    memcpy(tools_other->tool, "other", sizeof "other");
    stats->mcp_count = 0;
    pthread_mutex_init(&stats->mutex, NULL);
    return 0;
}

void gateway_stats_free(struct gateway_stats *stats)
{
    if (stats->series == NULL)
        return;
    pthread_mutex_destroy(&stats->mutex);
    free(stats->series);
    stats->series = NULL;
    free(stats->mcp);
    stats->mcp = NULL;
}

/* The series of (model, caller), made if there is room (mutex held). A
 * linear search: the set is small and the add is once per call. */
static struct gateway_stats_series *series_of(struct gateway_stats *stats, const char *model,
                                              const char *caller, const char *team)
{
    for (uint32_t i = 0; i < stats->count; i++) {
        struct gateway_stats_series *s = &stats->series[i];
        if (strcmp(s->model, model) == 0 && strcmp(s->caller, caller) == 0)
            return s;
    }
    if (stats->count == GATEWAY_STATS_SERIES_MAX)
        return &stats->series[GATEWAY_STATS_SERIES_MAX];
    struct gateway_stats_series *s = &stats->series[stats->count++];
    snprintf(s->model, sizeof s->model, "%s", model);
    snprintf(s->caller, sizeof s->caller, "%s", caller);
    snprintf(s->team, sizeof s->team, "%s", team != NULL ? team : "");
    return s;
}

void gateway_stats_add(struct gateway_stats *stats, const char *model, const char *caller,
                       const char *team, const struct gateway_stats_delta *delta)
{
    pthread_mutex_lock(&stats->mutex);
    struct gateway_stats_series *s = series_of(stats, model, caller, team);
    s->calls += delta->forwarded;
    s->denials += delta->denied;
    s->upstream_errors += delta->upstream_error;
    s->input_tokens = amount_add_saturating(s->input_tokens, delta->input_tokens);
    s->output_tokens = amount_add_saturating(s->output_tokens, delta->output_tokens);
    s->cost_usd_micros = amount_add_saturating(s->cost_usd_micros, delta->cost_usd_micros);
    if (delta->waited_ms > 0) {
        s->waited_calls++;
        s->waited_ms = amount_add_saturating(s->waited_ms, (uint64_t)delta->waited_ms);
    }
    if (delta->latency_us >= 0) {
        uint32_t b = 0;
        while (b < GATEWAY_LATENCY_BUCKETS && delta->latency_us > latency_bounds_us[b])
            b++;
        s->latency_buckets[b]++;
        s->latency_sum_us += (uint64_t)delta->latency_us;
    }
    pthread_mutex_unlock(&stats->mutex);
}

/* The series of (server, tool), made if there is room (mutex held). */
static struct gateway_mcp_series *mcp_series_of(struct gateway_stats *stats, const char *server,
                                                const char *tool, size_t tool_length)
{
    for (uint32_t i = 0; i < stats->mcp_count; i++) {
        struct gateway_mcp_series *s = &stats->mcp[i];
        if (strcmp(s->server, server) == 0 && strlen(s->tool) == tool_length &&
            memcmp(s->tool, tool, tool_length) == 0)
            return s;
    }
    bool printable = tool_length > 0 && tool_length <= GW_NAME_LENGTH_MAX;
    for (size_t i = 0; i < tool_length && printable; i++)
        printable = tool[i] >= 0x20 && tool[i] <= 0x7e; /* a label value as it is */
    if (stats->mcp_count == GATEWAY_MCP_STATS_SERIES_MAX || !printable)
        return &stats->mcp[GATEWAY_MCP_STATS_SERIES_MAX];
    struct gateway_mcp_series *s = &stats->mcp[stats->mcp_count++];
    snprintf(s->server, sizeof s->server, "%s", server);
    memcpy(s->tool, tool, tool_length);
    s->tool[tool_length] = '\0';
    return s;
}

void gateway_stats_add_tool_call(struct gateway_stats *stats, const char *server, const char *tool,
                                 size_t tool_length, enum gateway_mcp_stats_outcome outcome,
                                 uint64_t cost_usd_micros)
{
    assert((unsigned)outcome < GATEWAY_MCP_STATS_OUTCOMES);
    pthread_mutex_lock(&stats->mutex);
    struct gateway_mcp_series *s = mcp_series_of(stats, server, tool, tool_length);
    s->calls[outcome]++;
    s->cost_usd_micros = amount_add_saturating(s->cost_usd_micros, cost_usd_micros);
    pthread_mutex_unlock(&stats->mutex);
}

static const char *const mcp_outcome_names[GATEWAY_MCP_STATS_OUTCOMES] = {
    "result", "tool_error", "rpc_error", "no_answer", "denied"};

static void mcp_labels(struct buffer *out, const char *name, const struct gateway_mcp_series *s)
{
    buffer_append_str(out, name);
    buffer_append_str(out, "{server=");
    buffer_append_json_string(out, s->server, strlen(s->server));
    buffer_append_str(out, ",tool=");
    buffer_append_json_string(out, s->tool, strlen(s->tool));
}

/* llmlimit_mcp_tool_calls_total{server,tool,outcome} and
 * llmlimit_mcp_tool_cost_usd_micros_total{server,tool} (mutex held). */
static void mcp_metrics_render(struct buffer *out, const struct gateway_stats *stats)
{
    const char *calls = "llmlimit_mcp_tool_calls_total";
    const char *cost = "llmlimit_mcp_tool_cost_usd_micros_total";
    buffer_printf(out,
                  "# HELP %s MCP tools/call requests by server, tool and outcome.\n"
                  "# TYPE %s counter\n",
                  calls, calls);
    for (uint32_t i = 0; i <= stats->mcp_count; i++) {
        const struct gateway_mcp_series *s =
            &stats->mcp[i == stats->mcp_count ? GATEWAY_MCP_STATS_SERIES_MAX : i];
        for (uint32_t o = 0; o < GATEWAY_MCP_STATS_OUTCOMES; o++) {
            if (s->calls[o] == 0)
                continue;
            mcp_labels(out, calls, s);
            buffer_printf(out, ",outcome=\"%s\"} %" PRIu64 "\n", mcp_outcome_names[o], s->calls[o]);
        }
    }
    buffer_printf(out,
                  "# HELP %s What settled MCP tool calls cost, by server and tool.\n"
                  "# TYPE %s counter\n",
                  cost, cost);
    for (uint32_t i = 0; i <= stats->mcp_count; i++) {
        const struct gateway_mcp_series *s =
            &stats->mcp[i == stats->mcp_count ? GATEWAY_MCP_STATS_SERIES_MAX : i];
        uint64_t any = 0;
        for (uint32_t o = 0; o < GATEWAY_MCP_STATS_OUTCOMES; o++)
            any += s->calls[o];
        if (any == 0)
            continue;
        mcp_labels(out, cost, s);
        buffer_printf(out, "} %" PRIu64 "\n", s->cost_usd_micros);
    }
}

/* "tools":[{server, tool, calls, denials, errors, usd_micros}] (mutex held). */
static void mcp_json(struct buffer *out, const struct gateway_stats *stats)
{
    buffer_append_str(out, ",\"tools\":[");
    bool first = true;
    for (uint32_t i = 0; i <= stats->mcp_count; i++) {
        const struct gateway_mcp_series *s =
            &stats->mcp[i == stats->mcp_count ? GATEWAY_MCP_STATS_SERIES_MAX : i];
        const uint64_t *c = s->calls;
        uint64_t forwarded = c[GATEWAY_MCP_STATS_RESULT] + c[GATEWAY_MCP_STATS_TOOL_ERROR] +
                             c[GATEWAY_MCP_STATS_RPC_ERROR] + c[GATEWAY_MCP_STATS_NO_ANSWER];
        if (forwarded == 0 && c[GATEWAY_MCP_STATS_DENIED] == 0)
            continue;
        if (!first)
            buffer_append_char(out, ',');
        first = false;
        buffer_append_str(out, "{\"server\":");
        buffer_append_json_string(out, s->server, strlen(s->server));
        buffer_append_str(out, ",\"tool\":");
        buffer_append_json_string(out, s->tool, strlen(s->tool));
        buffer_printf(out,
                      ",\"calls\":%" PRIu64 ",\"denials\":%" PRIu64 ",\"errors\":%" PRIu64
                      ",\"usd_micros\":%" PRIu64 "}",
                      forwarded, c[GATEWAY_MCP_STATS_DENIED],
                      forwarded - c[GATEWAY_MCP_STATS_RESULT], s->cost_usd_micros);
    }
    buffer_append_char(out, ']');
}

static void labels(struct buffer *out, const struct gateway_stats_series *s)
{
    buffer_append_str(out, "{model=");
    buffer_append_json_string(out, s->model, strlen(s->model));
    buffer_append_str(out, ",caller=");
    buffer_append_json_string(out, s->caller, strlen(s->caller));
}

static void counter_lines(struct buffer *out, const struct gateway_stats *stats, uint32_t count,
                          const char *name, const char *help, size_t offset)
{
    buffer_printf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (uint32_t i = 0; i <= count; i++) {
        const struct gateway_stats_series *s =
            &stats->series[i == count ? GATEWAY_STATS_SERIES_MAX : i];
        uint64_t value;
        memcpy(&value, (const char *)s + offset, sizeof value);
        if (value == 0)
            continue;
        buffer_append_str(out, name);
        labels(out, s);
        buffer_append_str(out, "} ");
        buffer_append_u64(out, value);
        buffer_append_char(out, '\n');
    }
}

static void latency_lines(struct buffer *out, const struct gateway_stats *stats, uint32_t count)
{
    const char *name = "llmlimit_gateway_upstream_latency_seconds";
    buffer_printf(out,
                  "# HELP %s Time from forwarding a call to the upstream's first byte.\n"
                  "# TYPE %s histogram\n",
                  name, name);
    for (uint32_t i = 0; i <= count; i++) {
        const struct gateway_stats_series *s =
            &stats->series[i == count ? GATEWAY_STATS_SERIES_MAX : i];
        uint64_t total = 0;
        for (uint32_t b = 0; b <= GATEWAY_LATENCY_BUCKETS; b++)
            total += s->latency_buckets[b];
        if (total == 0)
            continue;
        uint64_t cumulative = 0;
        for (uint32_t b = 0; b <= GATEWAY_LATENCY_BUCKETS; b++) {
            cumulative += s->latency_buckets[b];
            buffer_printf(out, "%s_bucket", name);
            labels(out, s);
            buffer_printf(out, ",le=\"%s\"} %" PRIu64 "\n",
                          b < GATEWAY_LATENCY_BUCKETS ? latency_labels[b] : "+Inf", cumulative);
        }
        buffer_printf(out, "%s_sum", name);
        labels(out, s);
        buffer_printf(out, "} %.6f\n", (double)s->latency_sum_us / 1e6);
        buffer_printf(out, "%s_count", name);
        labels(out, s);
        buffer_printf(out, "} %" PRIu64 "\n", total);
    }
}

/* The per-series counters, each a metric family of its own named after its
 * field of struct gateway_stats_series. */
#define COUNTER(field, help)                                                                       \
    {                                                                                              \
        "llmlimit_gateway_" #field "_total", help, offsetof(struct gateway_stats_series, field)    \
    }
static const struct {
    const char *name;
    const char *help;
    size_t offset;
} COUNTERS[] = {
    COUNTER(calls, "Calls forwarded upstream, by model and caller."),
    COUNTER(denials, "Calls refused with 429 (a limit did not fit)."),
    COUNTER(upstream_errors, "Calls the upstream refused (4xx, 5xx) or failed."),
    COUNTER(input_tokens, "Input tokens of settled calls."),
    COUNTER(output_tokens, "Output tokens of settled calls."),
    COUNTER(cost_usd_micros, "Cost of settled calls in usd_micros."),
    COUNTER(waited_calls, "Calls whose reserve waited for capacity (then admitted or not)."),
    COUNTER(waited_ms, "Milliseconds those reserves waited."),
};
#undef COUNTER

void gateway_metrics_render(struct gateway *g, struct buffer *out)
{
    struct gateway_stats *stats = &g->stats;
    pthread_mutex_lock(&stats->mutex);
    uint32_t count = stats->count;
    for (size_t i = 0; i < sizeof COUNTERS / sizeof COUNTERS[0]; i++)
        counter_lines(out, stats, count, COUNTERS[i].name, COUNTERS[i].help, COUNTERS[i].offset);
    latency_lines(out, stats, count);
    mcp_metrics_render(out, stats);
    pthread_mutex_unlock(&stats->mutex);
    buffer_printf(out,
                  "# HELP llmlimit_gateway_answer_bytes_held Bytes of whole answers held until "
                  "their clients take them.\n"
                  "# TYPE llmlimit_gateway_answer_bytes_held gauge\n"
                  "llmlimit_gateway_answer_bytes_held %" PRIu64 "\n"
                  "# HELP llmlimit_gateway_answer_bytes_max --max-gateway-answer-bytes.\n"
                  "# TYPE llmlimit_gateway_answer_bytes_max gauge\n"
                  "llmlimit_gateway_answer_bytes_max %" PRIu64 "\n",
                  __atomic_load_n(&g->answer_bytes_held, __ATOMIC_RELAXED), g->answer_bytes_max);
}

void gateway_stats_json(struct gateway *g, struct buffer *out)
{
    struct gateway_stats *stats = &g->stats;
    pthread_mutex_lock(&stats->mutex);
    buffer_append_str(out, "{\"keys\":[");
    bool first = true;
    for (uint32_t i = 0; i <= stats->count; i++) {
        const struct gateway_stats_series *s =
            &stats->series[i == stats->count ? GATEWAY_STATS_SERIES_MAX : i];
        if (i == stats->count && s->calls == 0 && s->denials == 0)
            continue; /* "other" only once it counts something */
        if (!first)
            buffer_append_char(out, ',');
        first = false;
        buffer_append_str(out, "{\"model\":");
        buffer_append_json_string(out, s->model, strlen(s->model));
        buffer_append_str(out, ",\"caller\":");
        buffer_append_json_string(out, s->caller, strlen(s->caller));
        buffer_append_str(out, ",\"team\":");
        buffer_append_json_string(out, s->team, strlen(s->team));
        uint64_t tokens = amount_add_saturating(s->input_tokens, s->output_tokens);
        buffer_printf(out,
                      ",\"requests\":%" PRIu64 ",\"tokens\":%" PRIu64 ",\"usd_micros\":%" PRIu64
                      ",\"denials\":%" PRIu64 ",\"upstream_errors\":%" PRIu64
                      ",\"input_tokens\":%" PRIu64 ",\"output_tokens\":%" PRIu64 "}",
                      s->calls, tokens, s->cost_usd_micros, s->denials, s->upstream_errors,
                      s->input_tokens, s->output_tokens);
    }
    buffer_append_char(out, ']');
    mcp_json(out, stats);
    buffer_append_char(out, '}');
    pthread_mutex_unlock(&stats->mutex);
}
