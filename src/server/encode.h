/* JSON replies written straight into a buffer (docs/api.md). The data-path
 * encoders write an object's members without the braces and return the HTTP
 * status the single endpoint answers, so batch results can add "status". */
#ifndef LLMLIMIT_SERVER_ENCODE_H
#define LLMLIMIT_SERVER_ENCODE_H

#include "backend/backend.h"
#include "util/buffer.h"

/* 200, 400, 409 or 503 for a backend result status. */
unsigned encode_http_status(enum result_status status);

unsigned encode_reserve_members(struct buffer *b, const struct reserve_request *request,
                                const struct reserve_result *result);
unsigned encode_complete_members(struct buffer *b, const struct complete_result *result);
unsigned encode_release_members(struct buffer *b, const struct release_result *result);

/* {"definition":{...},"status":...,"pending_decrease_to":N} */
void encode_limit_state(struct buffer *b, const struct limit_state *state);
/* {"key",...,"period_end_unix_ms"} */
void encode_usage(struct buffer *b, const struct limit_usage *usage);
/* {"error":"<error>"}, with "ok":false first when with_ok. */
void encode_error(struct buffer *b, const char *error, bool with_ok);

#endif
