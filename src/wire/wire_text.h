/* The texts of the wire (docs/api.md, "Errors"): every error and validation
 * text llmlimitd answers with, named once. A handler or decoder names the
 * constant; the text is written here only, so docs, tests and clients have
 * one place to read it from (the backends' errors and warnings are
 * encode_backend_error's, src/wire/encode.c). */
#ifndef LLMLIMIT_WIRE_TEXT_H
#define LLMLIMIT_WIRE_TEXT_H

/* Validation reasons, after "<field>: ". */
#define WIRE_KEY_SYNTAX "must be 1-256 bytes of printable ASCII without whitespace"
#define WIRE_LEASE_ID_SYNTAX "must be 1-128 bytes of [A-Za-z0-9._:-]"
#define WIRE_AMOUNT_RANGE "1..9223372036854775807"
#define WIRE_ACTUAL_RANGE "0..9223372036854775807"

/* Whole errors ({"error": ...}). */
#define WIRE_OUT_OF_MEMORY "out_of_memory"
#define WIRE_BACKEND_ERROR "backend_error"
#define WIRE_SHUTTING_DOWN "shutting_down"
#define WIRE_ADMIN_QUEUE_FULL "admin_queue_full"
#define WIRE_BODY_TOO_LARGE "body_too_large"
#define WIRE_NOT_FOUND "not_found"
#define WIRE_METHOD_NOT_ALLOWED "method_not_allowed"
#define WIRE_UNAUTHORIZED "unauthorized"
#define WIRE_ADMIN_TOKEN_REQUIRED "admin_token_required"
#define WIRE_NOT_SUPPORTED_BY_BACKEND "not_supported_by_backend"
#define WIRE_GATEWAY_NOT_ENABLED "gateway_not_enabled"
#define WIRE_REGISTRY_WRITE_FAILED "registry_write_failed"
#define WIRE_REGISTRY_WRITE_FAILED_IN_FORCE "registry_write_failed:in_force"
#define WIRE_CONTROL_UNAVAILABLE "control_store_unavailable"
#define WIRE_KEY_BAD_ESCAPE "key: invalid percent-encoding"
#define WIRE_KEY_INVALID "key: " WIRE_KEY_SYNTAX
#define WIRE_KEY_NOT_A_BUDGET "key: not a budget"
#define WIRE_LEASE_ID_INVALID "lease_id: " WIRE_LEASE_ID_SYNTAX
#define WIRE_BODY_NOT_OBJECT "body: must be a JSON object"
#define WIRE_KIND_INVALID "kind: must be rolling, concurrency or budget"
#define WIRE_GROUP_BY_INVALID "group_by: must be caller"
#define WIRE_ADVANCE_MS_INVALID "advance_ms: must be an integer of at most 100 years"

#endif
