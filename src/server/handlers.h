/* The handlers of llmlimitd's own routes (routes.c), each answering one
 * exchange: the data path (handlers_data.c), the synchronous routes
 * (handlers_admin.c) and the console (console.c). */
#ifndef LLMLIMIT_SERVER_HANDLERS_H
#define LLMLIMIT_SERVER_HANDLERS_H

struct exchange;

/* handlers_data.c */
int handle_reserve(struct exchange *exchange);
int handle_complete(struct exchange *exchange);
int handle_release(struct exchange *exchange);
int handle_reserve_batch(struct exchange *exchange);
int handle_complete_batch(struct exchange *exchange);

/* handlers_admin.c */
int handle_admin_limits(struct exchange *exchange);
int handle_admin_limit(struct exchange *exchange);
int handle_admin_clock(struct exchange *exchange);
int handle_usage(struct exchange *exchange);
int handle_events(struct exchange *exchange);
int handle_alerts(struct exchange *exchange);
int handle_metrics(struct exchange *exchange);
int handle_healthz(struct exchange *exchange);
int handle_root(struct exchange *exchange);
int handle_readyz(struct exchange *exchange);

/* handlers_keys.c */
int handle_admin_keys(struct exchange *exchange);
int handle_admin_key(struct exchange *exchange);

/* console.c */
int handle_console_asset(struct exchange *exchange);
int handle_console_status(struct exchange *exchange);
int handle_console_limits(struct exchange *exchange);
int handle_console_holds(struct exchange *exchange);
int handle_console_denials(struct exchange *exchange);
int handle_console_spend(struct exchange *exchange);
int handle_console_gateway(struct exchange *exchange);
int handle_console_gateway_limits(struct exchange *exchange);

#endif
