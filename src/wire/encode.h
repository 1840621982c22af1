/* JSON replies written straight into a buffer (docs/api.md). The data-path
 * encoders write an object's members without the braces and return the HTTP
 * status the single endpoint answers, so batch results can add "status". */
#ifndef LLMLIMIT_SERVER_ENCODE_H
#define LLMLIMIT_SERVER_ENCODE_H

#include "backend/backend.h"
#include "util/buffer.h"

/* 200, 400, 409 or 503 for a backend error (200: a definitive reserve
 * answer, allowed or denied). */
unsigned encode_http_status(enum backend_error error);

/* The error's wire text as a JSON string; key (key_length bytes) is the key
 * it names, NULL for an error that names none (backend_error_names_key). */
void encode_backend_error(struct buffer *b, enum backend_error error, const char *key,
                          uint32_t key_length);
/* The error's wire text without a key (for an error that names one: the
 * prefix the key follows). Static storage. */
const char *encode_backend_error_text(enum backend_error error);

/* 200, 400, 404 or 503 for an admin call's result. */
unsigned encode_admin_status(enum backend_admin_result result);
/* The wire text of an admin call's failure (docs/api.md) into out, always
 * NUL-terminated: key is the key the call named; wanted and in_force, what
 * a put asked and the limit in force (KIND_CHANGED, PERIOD_CHANGED; else
 * they may be NULL). Not for BACKEND_OK, nor BACKEND_ADMIN_INVALID, whose
 * text the validator wrote (src/core/limits.c). */
void encode_admin_error(char *out, size_t out_size, enum backend_admin_result result,
                        const char *key, const struct limit_definition *wanted,
                        const struct limit_state *in_force);

unsigned encode_reserve_members(struct buffer *b, const struct reserve_request *request,
                                const struct reserve_result *result);
unsigned encode_complete_members(struct buffer *b, const struct complete_request *request,
                                 const struct complete_result *result);
unsigned encode_release_members(struct buffer *b, const struct release_result *result);

/* The nine definition members, "key" to "overage", no braces. */
void encode_definition_members(struct buffer *b, const struct limit_definition *d);
/* "reserved", "used", "debt", "available", "period_start_unix_ms" and
 * "period_end_unix_ms" (0 unless a budget), no braces. */
void encode_usage_amounts(struct buffer *b, const struct limit_usage *usage);
/* {"definition":{...},"status":...,"pending_decrease_to":N} */
void encode_limit_state(struct buffer *b, const struct limit_state *state);
/* {"key",...,"period_end_unix_ms"} */
void encode_usage(struct buffer *b, const struct limit_usage *usage);
/* {"error":"<error>"}, with "ok":false first when with_ok. */
void encode_error(struct buffer *b, const char *error, bool with_ok);

#endif
