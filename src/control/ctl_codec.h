/* etcd v3's JSON API (its gRPC gateway) as bytes: base64 of keys and
 * values, the request bodies of put, range, deleterange, txn and watch, and
 * the decoders of their answers. No I/O here (ctl_etcd.c sends them); every
 * answer is hostile input: a bad one is an error, never an assert. */
#ifndef LLMLIMIT_CONTROL_CTL_CODEC_H
#define LLMLIMIT_CONTROL_CTL_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buffer.h"

/* A key and its value as the store holds them. key and value are malloc'd
 * and NUL-terminated (either may hold NUL bytes: use the lengths); the
 * owner frees them with ctl_kv_free. */
struct ctl_kv {
    char *key;
    size_t key_length;
    char *value;
    size_t value_length;
    int64_t create_revision;
    int64_t mod_revision;
};

void ctl_kv_free(struct ctl_kv *kv);

enum ctl_event_type {
    CTL_EVENT_PUT = 0,
    CTL_EVENT_DELETE = 1,
};

/* One change seen by a watch; a delete's kv has a key and no value. */
struct ctl_event {
    enum ctl_event_type type;
    struct ctl_kv kv;
};

/* Standard base64 with padding, as etcd's JSON carries bytes. */
void ctl_base64_append(struct buffer *b, const void *bytes, size_t length);
/* Decodes text[0..length) into out (room for out_size bytes, a NUL is
 * added after them); 0 with *out_length, or -1: not base64 (a character
 * outside the alphabet, a length not a multiple of 4, misplaced padding,
 * non-zero bits after the last byte) or more than out_size - 1 bytes. */
int ctl_base64_decode(const char *text, size_t length, char *out, size_t out_size,
                      size_t *out_length);

/* The end of a prefix's range: the prefix with its last byte that is not
 * 0xff incremented and what follows dropped. 0, or -1 when every byte is
 * 0xff or the prefix is empty (no such end) or out_size is too small. */
int ctl_prefix_end(const char *prefix, size_t length, char *out, size_t out_size,
                   size_t *out_length);

/* Request bodies, appended to b (b->failed when it could not grow). */
void ctl_encode_put(struct buffer *b, const char *key, size_t key_length, const char *value,
                    size_t value_length);
/* Keys key..end (end NULL: key alone), at most limit (0: no limit), as of
 * revision (0: the newest). */
void ctl_encode_range(struct buffer *b, const char *key, size_t key_length, const char *end,
                      size_t end_length, uint32_t limit, int64_t revision);
void ctl_encode_delete(struct buffer *b, const char *key, size_t key_length);
/* A txn putting value if the key's mod_revision is mod_revision (0: the
 * key does not exist, a create-once). */
void ctl_encode_put_if(struct buffer *b, const char *key, size_t key_length, const char *value,
                       size_t value_length, int64_t mod_revision);
/* A watch of key..end from start_revision. */
void ctl_encode_watch(struct buffer *b, const char *key, size_t key_length, const char *end,
                      size_t end_length, int64_t start_revision);

/* Answer decoders. Each parses text[0..length) in place (the text is
 * changed) and returns 0, or -1 with the reason in error: invalid JSON, an
 * error answer ("etcd: <message>"), a missing or malformed field, a key
 * past CTL_KEY_BYTES_MAX or a value past CTL_VALUE_BYTES_MAX. */

/* put: the store's revision after it. */
int ctl_decode_put(char *text, size_t length, int64_t *revision, char *error, size_t error_size);
/* deleterange: the revision after it and how many keys went. */
int ctl_decode_delete(char *text, size_t length, int64_t *revision, int64_t *deleted, char *error,
                      size_t error_size);
/* txn: the revision after it and whether its compare held. */
int ctl_decode_txn(char *text, size_t length, int64_t *revision, bool *succeeded, char *error,
                   size_t error_size);

/* One page of a range. kvs is malloc'd (count entries, at most
 * CTL_RANGE_PAGE_KEYS; more is an error); free with ctl_range_page_free. */
struct ctl_range_page {
    int64_t revision; /* the store's, as of which the page was read */
    bool more;        /* keys are left after this page */
    struct ctl_kv *kvs;
    size_t count;
};

int ctl_decode_range(char *text, size_t length, struct ctl_range_page *page, char *error,
                     size_t error_size);
void ctl_range_page_free(struct ctl_range_page *page);

/* One line of a watch stream. events is malloc'd (at most
 * CTL_WATCH_EVENTS_MAX); free with ctl_watch_response_free. */
struct ctl_watch_response {
    int64_t revision;         /* the header's */
    bool created;             /* the watch is set up */
    bool canceled;            /* the store ended the watch (see compact_revision) */
    int64_t compact_revision; /* > 0: start_revision was compacted away: range again */
    struct ctl_event *events;
    size_t count;
};

int ctl_decode_watch(char *text, size_t length, struct ctl_watch_response *response, char *error,
                     size_t error_size);
void ctl_watch_response_free(struct ctl_watch_response *response);

#endif
