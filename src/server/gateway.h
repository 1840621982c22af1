/* Gateway mode (docs/gateway.md): llmlimitd as a proxy that speaks the
 * providers' APIs, each a dialect of gateway/gw_dialect.h's table.
 * Each call is authenticated by its virtual key, estimated, reserved in
 * every limit its templates name (all or nothing), forwarded upstream by the
 * forwarding engine (src/gateway/gw_forward.c) and settled from the
 * answer's usage: completed, or released when the upstream refused it. */
#ifndef LLMLIMIT_SERVER_GATEWAY_H
#define LLMLIMIT_SERVER_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buffer.h"

struct server;
struct exchange;
struct gateway;

/* Loads the config (--gateway-config, else DATA_DIR/gateway.json when it
 * exists) and starts the forwarding engine. 0 with *out (NULL when gateway
 * mode is off: no file), or -1 with "<file>: line L: <path>: <reason>". */
int gateway_open(struct server *server, struct gateway **out, char *error, size_t error_size);
/* Cancels every call still forwarding (each is settled with what it used
 * so far) and waits until every call's accounting is done. For shutdown,
 * before the backend closes; the routes answer 503 afterwards. */
void gateway_quiesce(struct gateway *gateway);
void gateway_close(struct gateway *gateway);

/* Reads the config file again (SIGHUP). A bad file changes nothing: the old
 * config stays in force. 0, or -1 with the reason in error. */
int gateway_reload(struct gateway *gateway, char *error, size_t error_size);
const char *gateway_config_path(const struct gateway *gateway);
/* What the config in force holds (the start-up log). */
void gateway_config_counts(struct gateway *gateway, uint32_t *models, uint32_t *keys,
                           uint32_t *upstreams, uint32_t *limits);

/* The limit templates in force, as GET /v1/console/gateway/limits answers
 * them: {"limits":[{"key","amount","calls"}]} (docs/api.md). */
void gateway_templates_json(struct gateway *gateway, struct buffer *out);

/* The routes of the gateway's dialects (src/server/routes.c builds them
 * from gateway/gw_dialect.h's table): a call, a model named in the path,
 * a stored object, the list of models, each by its row's kind. */
int handle_gateway(struct exchange *exchange);
/* POST, GET and DELETE /mcp/{server} (gateway_mcp.c, docs/mcp.md) */
int handle_gateway_mcp(struct exchange *exchange);

/* Prometheus lines of the gateway: calls, tokens, cost, denials, upstream
 * errors and latency, per model and caller (metrics.c calls it). */
void gateway_metrics_render(struct gateway *gateway, struct buffer *out);
/* The same figures for the console's API: {"keys":[{"model","caller",
 * "team","requests","tokens","usd_micros","denials","upstream_errors",
 * "input_tokens","output_tokens"}]}. */
void gateway_stats_json(struct gateway *gateway, struct buffer *out);

#endif
