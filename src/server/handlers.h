/* The handlers of llmlimitd's own routes (routes.c), each answering one
 * exchange: the data path (handlers_data.c), the synchronous routes
 * (handlers_admin.c) and the console (console.c). */
#ifndef LLMLIMIT_SERVER_HANDLERS_H
#define LLMLIMIT_SERVER_HANDLERS_H

#include <microhttpd.h>

struct exchange;

/* handlers_data.c */
enum MHD_Result handle_reserve(struct exchange *exchange);
enum MHD_Result handle_complete(struct exchange *exchange);
enum MHD_Result handle_release(struct exchange *exchange);
enum MHD_Result handle_reserve_batch(struct exchange *exchange);
enum MHD_Result handle_complete_batch(struct exchange *exchange);

/* handlers_admin.c */
enum MHD_Result handle_admin_limits(struct exchange *exchange);
enum MHD_Result handle_admin_limit(struct exchange *exchange);
enum MHD_Result handle_admin_clock(struct exchange *exchange);
enum MHD_Result handle_usage(struct exchange *exchange);
enum MHD_Result handle_events(struct exchange *exchange);
enum MHD_Result handle_metrics(struct exchange *exchange);
enum MHD_Result handle_healthz(struct exchange *exchange);
enum MHD_Result handle_root(struct exchange *exchange);
enum MHD_Result handle_readyz(struct exchange *exchange);

/* console.c */
enum MHD_Result handle_console_asset(struct exchange *exchange);
enum MHD_Result handle_console_status(struct exchange *exchange);
enum MHD_Result handle_console_limits(struct exchange *exchange);
enum MHD_Result handle_console_holds(struct exchange *exchange);
enum MHD_Result handle_console_denials(struct exchange *exchange);
enum MHD_Result handle_console_spend(struct exchange *exchange);
enum MHD_Result handle_console_gateway(struct exchange *exchange);

#endif
