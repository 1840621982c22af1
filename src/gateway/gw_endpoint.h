/* The gateway's surfaces: each route a client calls, the path it goes to
 * upstream, the dialect (upstream api) it belongs to, and whether it is
 * charged. A model is served only on the surfaces of its upstream's
 * dialect: same-dialect pass-through, never translated (docs/gateway.md,
 * "Surfaces"). */
#ifndef LLMLIMIT_GATEWAY_ENDPOINT_H
#define LLMLIMIT_GATEWAY_ENDPOINT_H

#include <stdbool.h>

#include "gw_config.h"

enum gw_endpoint {
    GW_ENDPOINT_CHAT_COMPLETIONS = 0,   /* POST /v1/chat/completions */
    GW_ENDPOINT_COMPLETIONS,            /* POST /v1/completions */
    GW_ENDPOINT_EMBEDDINGS,             /* POST /v1/embeddings */
    GW_ENDPOINT_MESSAGES,               /* POST /v1/messages (anthropic) */
    GW_ENDPOINT_MESSAGES_COUNT_TOKENS,  /* POST /v1/messages/count_tokens: not charged */
    GW_ENDPOINT_RESPONSES,              /* POST /v1/responses */
    GW_ENDPOINT_RESPONSES_INPUT_TOKENS, /* POST /v1/responses/input_tokens: not charged */
    /* POST /v1beta/models/{model}:generateContent and :streamGenerateContent
     * (gemini; the path upstream is gw_gemini_upstream_path's) */
    GW_ENDPOINT_GEMINI,
    GW_ENDPOINT_GEMINI_COUNT_TOKENS, /* POST /v1beta/models/{model}:countTokens: not charged */
    GW_ENDPOINT_MCP, /* /mcp/{server}: passed through; its tools/call charged (docs/mcp.md) */
};

#define GW_ENDPOINT_LAST GW_ENDPOINT_MCP

/* "/v1/chat/completions", ... as clients call it. */
const char *gw_endpoint_route(enum gw_endpoint endpoint);

/* What goes after the upstream's base_url (which ends in /v1):
 * "/chat/completions", "/messages", "/responses/input_tokens", ...; for
 * Gemini only the method (":generateContent"), the model going before it. */
const char *gw_endpoint_upstream_path(enum gw_endpoint endpoint);

/* The dialect whose upstreams serve it. */
enum gw_api gw_endpoint_api(enum gw_endpoint endpoint);

/* Whether a call reserves and is charged (count_tokens and input_tokens
 * are forwarded and authenticated, never charged). */
bool gw_endpoint_charged(enum gw_endpoint endpoint);

/* Whether model may be called on endpoint: its upstream speaks the
 * endpoint's dialect. */
bool gw_model_serves(const struct gw_model *model, enum gw_endpoint endpoint);

/* For the 400 of a model called on another dialect's route: the routes
 * that do serve it ("/v1/messages" for an anthropic model, ...). Static
 * text. */
const char *gw_model_routes(const struct gw_model *model);

#endif
