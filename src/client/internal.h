/* What the files of libllmlimit share and the public header does not show:
 * the client object, the HTTP transport over a pool of libcurl handles, the
 * retry loop, and the small helpers around them. */
#ifndef LLMLIMIT_CLIENT_INTERNAL_H
#define LLMLIMIT_CLIENT_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "llmlimit.h"

/* A response body larger than this is a protocol error (a list of
 * LIMITS_COUNT_MAX limits with long descriptions stays well below it). */
#define CLIENT_RESPONSE_BYTES_MAX (256u * 1024u * 1024u)
#define CLIENT_URL_LENGTH_MAX 2048
#define CLIENT_TOKEN_LENGTH_MAX 4096
#define CLIENT_CONNECTIONS_MAX 1024 /* ceiling of options.connections_max */
/* Percent-encoding at most triples a key. */
#define CLIENT_PATH_LENGTH_MAX (64 + 3 * LLMLIMIT_KEY_LENGTH_MAX)

struct transport_handle; /* one libcurl easy handle and its buffers */

struct llmlimit_client {
    char *base_url;      /* without a trailing '/' */
    char *authorization; /* "Authorization: Bearer <token>", or NULL */
    struct llmlimit_options options;

    pthread_mutex_t pool_mutex;
    pthread_cond_t pool_idle;          /* signalled when a handle is given back */
    struct transport_handle **handles; /* options.connections_max slots */
    bool *handle_busy;
    uint32_t handle_count; /* created so far, <= connections_max */
};

/* One HTTP answer. body is owned by the answer (http_answer_clear). */
struct http_answer {
    int http_status; /* 0 when the attempt got no answer */
    char *body;      /* NUL-terminated, or NULL */
    size_t body_length;
    bool queue_full; /* it carried "x-llmlimit-queue: full" */
};

void http_answer_clear(struct http_answer *answer);

/* One HTTP attempt on a pooled connection. Returns 0 when an answer (any
 * status) arrived; LLMLIMIT_ERR_TRANSPORT with the reason in status->error;
 * LLMLIMIT_ERR_NO_MEMORY; LLMLIMIT_ERR_PROTOCOL for an oversized body. */
int transport_send(struct llmlimit_client *client, const char *method, const char *path,
                   const char *body, size_t body_length, int64_t timeout_ms,
                   struct http_answer *answer, struct llmlimit_status *status);

int transport_pool_init(struct llmlimit_client *client);
void transport_pool_free(struct llmlimit_client *client);

/* How long a retried call may keep trying. */
struct retry_plan {
    int64_t deadline_ms;   /* monotonic */
    uint32_t attempts_max; /* 0: until the deadline */
    /* How long the server may hold each attempt before it answers (a
     * waiting reserve): added to attempt_timeout_ms. 0 from retry_plan_init. */
    int64_t hold_ms;
};

void retry_plan_init(struct retry_plan *plan, const struct llmlimit_client *client,
                     int64_t timeout_ms, uint32_t attempts_max);

/* Sends until a definitive answer: transport errors and 5xx answers are
 * retried with backoff while the plan allows. Returns 0 with a non-5xx
 * answer (any status, the caller maps it); LLMLIMIT_ERR_DEADLINE when the
 * deadline passed; LLMLIMIT_ERR_TRANSPORT / LLMLIMIT_ERR_UNAVAILABLE when
 * the attempts ran out first; LLMLIMIT_ERR_NO_MEMORY, LLMLIMIT_ERR_PROTOCOL. */
int client_send_retrying(struct llmlimit_client *client, const char *method, const char *path,
                         const char *body, size_t body_length, const struct retry_plan *plan,
                         uint32_t *backoff_round, struct http_answer *answer,
                         struct llmlimit_status *status);
/* POSTs body to path as client_send_retrying does, then answer_take: 0
 * with the answer's JSON in *json_out (json_decref; NULL when no answer
 * came), or the error. *http_status (may be NULL) is the answer's status,
 * 0 when none came. */
int client_post_json(struct llmlimit_client *client, const char *path, const char *body,
                     size_t body_length, const struct retry_plan *plan, uint32_t *backoff_round,
                     int *http_status, json_t **json_out, struct llmlimit_status *status);

/* Waits before retry number `round` (0-based), never past the deadline.
 * Returns false when the deadline has passed (no time left to retry). */
bool client_backoff(const struct llmlimit_client *client, const struct retry_plan *plan,
                    uint32_t round);

/* The error for an HTTP status: 0 for 2xx, LLMLIMIT_ERR_* otherwise
 * (status.c, with the status functions below and copy_string). */
int client_status_error(int http_status);

/* Copies the "error" string of a JSON body (if any) into status->error. */
void client_status_from_body(struct llmlimit_status *status, const json_t *body);

void status_reset(struct llmlimit_status *status);
/* The caller's status, or local when it passed NULL, reset: every public
 * call starts with it. */
struct llmlimit_status *status_begin(struct llmlimit_status *status, struct llmlimit_status *local);
void status_set_error(struct llmlimit_status *status, const char *message);

/* Monotonic milliseconds and a sleep that restarts after signals. */
int64_t client_monotonic_ms(void);
void client_sleep_ms(int64_t ms);
/* A random number from getrandom (backoff jitter only; not on the hot path). */
uint64_t client_random_u64(void);

/* Syntax checks matching the server's (docs/api.md "Conventions"). */
bool client_key_valid(const char *key);
bool client_lease_id_valid(const char *lease_id);

/* Copies src into dst of dst_size bytes, truncating; always NUL-terminates. */
void copy_string(char *dst, size_t dst_size, const char *src);

/* The server's error and warning texts (docs/api.md), read here and nowhere
 * else: the LLMLIMIT_DENIAL_* of a reserve error, the LLMLIMIT_WARNING_* of
 * a complete warning (0 for a text it does not know). */
int codec_denial(const char *error);
uint32_t codec_warning_flag(const char *warning);
/* Copies an answer object's "error" ("" when absent) into error, of
 * error_size bytes. 0, or LLMLIMIT_ERR_PROTOCOL when it is not a string. */
int codec_error_copy(const json_t *json, char *error, size_t error_size);

/* Writes "<prefix><percent-encoded key>" into out. Returns 0, or
 * LLMLIMIT_ERR_INVALID_ARGUMENT if the key is invalid. */
int path_with_key(char *out, size_t out_size, const char *prefix, const char *key);

/* Parses a JSON answer body; NULL when it is not a JSON object. */
json_t *answer_json(const struct http_answer *answer);

/* Consumes a definitive answer: parses its body into *json_out (the caller
 * frees it with json_decref; NULL when not a JSON object), copies its
 * "error" into status, clears the answer. Returns the error of its HTTP
 * status, or LLMLIMIT_ERR_PROTOCOL for a 2xx without a JSON object. */
int answer_take(struct http_answer *answer, struct llmlimit_status *status, json_t **json_out);

/* Integer field of an object: 0 when absent; false when present but not an
 * integer. */
bool json_field_i64(const json_t *object, const char *name, int64_t *out);
bool json_field_u64(const json_t *object, const char *name, uint64_t *out);
/* String field: "" when absent; NULL when present but not a string. */
const char *json_field_string(const json_t *object, const char *name);

/* Dumps a JSON value compactly into a new string (free()). NULL on no memory. */
char *json_dump_compact(const json_t *value, size_t *length);

/* Batches (reserve and complete): the items not yet answered for sure are
 * pending[0, pending_count), as indexes into the caller's arrays. */
typedef json_t *(*batch_item_json_fn)(uint32_t index, const void *context);
typedef int (*batch_item_read_fn)(const json_t *item, int status, uint32_t index, void *context);
/* {"requests":[...]} of the pending items, each from item_json (NULL: no
 * memory); a new string (free()), NULL on no memory. */
char *batch_body(const uint32_t *pending, size_t pending_count, batch_item_json_fn item_json,
                 const void *context, size_t *length);
/* Reads an answer's "results", one a pending item in order, each through
 * item_read with its status; keeps pending those answered 5xx (outcome
 * unknown). 0, item_read's error, or LLMLIMIT_ERR_PROTOCOL. */
int batch_read(const json_t *json, uint32_t *pending, size_t *pending_count,
               batch_item_read_fn item_read, void *context);
/* One round of a batch: posts the pending items' body to path and reads
 * the answer, as batch_body and batch_read. 0, LLMLIMIT_ERR_NO_MEMORY,
 * client_post_json's error or batch_read's. */
int batch_round(struct llmlimit_client *client, const char *path, uint32_t *pending,
                size_t *pending_count, batch_item_json_fn item_json, batch_item_read_fn item_read,
                void *context, const struct retry_plan *plan, uint32_t *backoff_round,
                struct llmlimit_status *status);

#endif
