/* Anthropic's dialect: Messages and its count_tokens; the key as
 * x-api-key, anthropic-version and anthropic-beta passed upstream, errors
 * in Anthropic's shape and rate-limit headers in its form too
 * (anthropic-ratelimit-*). */
#include "gw_dialect.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gw_error.h"
#include "gw_estimate_internal.h"

/* What a call that names no anthropic-version goes with. */
#define GW_ANTHROPIC_VERSION_DEFAULT "2023-06-01"

extern const struct gw_dialect gw_dialect_anthropic;

static const struct gw_route routes[] = {
    {"gateway_messages", "/v1/messages", GW_ROUTE_POST, false, GW_ROUTE_CALL, GW_ENDPOINT_MESSAGES,
     &gw_dialect_anthropic},
    {"gateway_count_tokens", "/v1/messages/count_tokens", GW_ROUTE_POST, false, GW_ROUTE_CALL,
     GW_ENDPOINT_MESSAGES_COUNT_TOKENS, &gw_dialect_anthropic},
};

/* Messages require max_tokens already (no bound to write); its streams
 * carry their usage unasked, and one cut before its end told its input at
 * its start. */
static const struct gw_surface surfaces[] = {
    {.endpoint = GW_ENDPOINT_MESSAGES,
     .route = "/v1/messages",
     .upstream_path = "/messages",
     .charged = true,
     .output_tokens = gw_answer_messages_output,
     .stream_cut = gw_sse_messages_cut},
    {.endpoint = GW_ENDPOINT_MESSAGES_COUNT_TOKENS,
     .route = "/v1/messages/count_tokens",
     .upstream_path = "/messages/count_tokens",
     .never_streams = true},
};

static int messages_usage(enum gw_endpoint endpoint, const struct jdoc_value *answer,
                          struct gw_usage *out, char *error, size_t error_size)
{
    (void)endpoint;
    return gw_usage_read_messages(answer, out, error, error_size);
}

static void messages_error(struct buffer *b, const struct gw_error_args *args)
{
    gw_error_anthropic(b, gw_anthropic_error_for_status(args->status), args->message, NULL);
    /* A refused key says which refusal (key_revoked, ...) in Anthropic's
     * error object too: its SDKs ignore a field they do not know. */
    if (args->status == 401 && args->code != NULL && b->length >= 2 && !b->failed) {
        b->length -= 2; /* the closing braces of the error and the whole */
        buffer_append_str(b, ",\"code\":");
        gw_json_string(b, args->code, strlen(args->code));
        buffer_append_str(b, "}}");
    }
}

static void messages_plain_error(struct buffer *b, unsigned status, const char *code,
                                 const char *reason)
{
    char text[192];
    snprintf(text, sizeof text, "%s%s%s", code, reason != NULL ? ": " : "",
             reason != NULL ? reason : "");
    gw_error_anthropic(b, gw_anthropic_error_for_status(status), text, NULL);
}

/* `event: error` with Anthropic's body (api_error). */
static void messages_error_event(struct buffer *b, enum gw_endpoint endpoint, const char *code,
                                 const char *message)
{
    if (endpoint != GW_ENDPOINT_MESSAGES) { /* never a stream: OpenAI's form */
        buffer_append_str(b, "data: ");
        gw_error_openai(b, message, "server_error", NULL, code);
        return;
    }
    buffer_append_str(b, "event: error\ndata: ");
    gw_error_anthropic(b, GW_ANTHROPIC_API_ERROR, message, NULL);
}

/* Anthropic writes a reset as an RFC 3339 time: "2026-05-01T12:00:00Z"
 * (whole seconds, rounded up: the limit is free by then). */
static void rfc3339_text(int64_t unix_ms, char *out, size_t size)
{
    time_t seconds = (time_t)(unix_ms / 1000 + (unix_ms % 1000 > 0));
    struct tm tm;
    gmtime_r(&seconds, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* anthropic-ratelimit-<family>-limit, -remaining and -reset. */
static void messages_limit_headers(enum gw_limit_family family,
                                   const struct gw_limit_figure *figure, int64_t now_unix_ms,
                                   gw_header_add_fn add, void *context)
{
    static const char *const names[] = {
        [GW_FAMILY_REQUESTS] = "requests",
        [GW_FAMILY_TOKENS] = "tokens",
        [GW_FAMILY_INPUT_TOKENS] = "input-tokens",
        [GW_FAMILY_OUTPUT_TOKENS] = "output-tokens",
    };
    char name[64], value[24]; /* every answer has these: no printf for the values */
    *buffer_put_u64(value, figure->capacity) = '\0';
    snprintf(name, sizeof name, "anthropic-ratelimit-%s-limit", names[family]);
    add(context, name, value);
    if (figure->remaining_known) {
        *buffer_put_i64(value, figure->remaining > 0 ? figure->remaining : 0) = '\0';
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-remaining", names[family]);
        add(context, name, value);
    }
    if (figure->reset_known) {
        char reset[80];
        int64_t reset_ms =
            figure->reset_at_unix_ms > now_unix_ms ? figure->reset_at_unix_ms : now_unix_ms;
        rfc3339_text(reset_ms, reset, sizeof reset);
        snprintf(name, sizeof name, "anthropic-ratelimit-%s-reset", names[family]);
        add(context, name, reset);
    }
}

const struct gw_dialect gw_dialect_anthropic = {
    .name = "anthropic",
    .api = GW_API_ANTHROPIC,
    .routes = routes,
    .route_count = sizeof routes / sizeof routes[0],
    .surfaces = surfaces,
    .surface_count = sizeof surfaces / sizeof surfaces[0],
    .key_header = "x-api-key",
    .unknown_key_message = GW_DIALECT_UNKNOWN_KEY_MESSAGE,
    .upstream_key = GW_KEY_X_API_KEY,
    .passed_headers = {{"anthropic-version", GW_ANTHROPIC_VERSION_DEFAULT},
                       {"anthropic-beta", NULL}},
    .passes_query = true,
    .served_routes = "/v1/messages",
    .too_large_advice = "Lower max_tokens (Claude Code asks 64000 on every call: set "
                        "CLAUDE_CODE_MAX_OUTPUT_TOKENS, e.g. 8000) or shorten the input",
    .invalid_json_prefix = GW_DIALECT_INVALID_JSON_PREFIX,
    .estimate = gw_estimate_messages,
    .usage = messages_usage,
    .stream_event = gw_sse_read_messages_event,
    .error = messages_error,
    .plain_error = messages_plain_error,
    .error_event = messages_error_event,
    .limit_headers = messages_limit_headers,
};
