/* A client of etcd v3 over its JSON API (the gRPC gateway, /v3/...) with
 * libcurl: put, prefix range (paged), delete, a create-once or
 * compare-and-set txn, and a watch read as a stream of JSON lines. Several
 * members: a call that cannot reach one tries the next. Blocking calls,
 * safe from several threads at once (each call has its own connection). */
#ifndef LLMLIMIT_CONTROL_CTL_ETCD_H
#define LLMLIMIT_CONTROL_CTL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl_codec.h"

struct ctl_etcd;

/* Parses "etcd://host:port[,host:port...]" (at most CTL_ENDPOINTS_MAX).
 * 0 with a new client (free with ctl_etcd_close), or -1 with the reason in
 * error (not etcd://, an empty or too long member, no port, too many). */
int ctl_etcd_open(const char *url, struct ctl_etcd **out, char *error, size_t error_size);
void ctl_etcd_close(struct ctl_etcd *etcd);

/* Each call returns 0, or -1 with the reason in error: no member
 * reachable (each was tried), an error answer, or an answer the codec
 * refuses (ctl_codec.h). A key is at most CTL_KEY_BYTES_MAX bytes, a value
 * at most CTL_VALUE_BYTES_MAX (past them -1, nothing sent). */
int ctl_etcd_put(struct ctl_etcd *etcd, const char *key, size_t key_length, const char *value,
                 size_t value_length, int64_t *revision, char *error, size_t error_size);
int ctl_etcd_delete(struct ctl_etcd *etcd, const char *key, size_t key_length, int64_t *revision,
                    int64_t *deleted, char *error, size_t error_size);
/* Puts value if the key's mod_revision is mod_revision (0: only if the
 * key does not exist); *succeeded says whether it did. */
int ctl_etcd_put_if(struct ctl_etcd *etcd, const char *key, size_t key_length, const char *value,
                    size_t value_length, int64_t mod_revision, bool *succeeded, int64_t *revision,
                    char *error, size_t error_size);

/* Every key under prefix, read page by page (CTL_RANGE_PAGE_KEYS keys a
 * page, fewer when a page's answer would pass CTL_RESPONSE_BYTES_MAX) as of
 * one revision, in key order. kvs is malloc'd; free with
 * ctl_range_free. More than CTL_RANGE_KEYS_MAX keys is -1. */
struct ctl_range {
    int64_t revision;
    struct ctl_kv *kvs;
    size_t count;
};

int ctl_etcd_range_prefix(struct ctl_etcd *etcd, const char *prefix, struct ctl_range *range,
                          char *error, size_t error_size);
void ctl_range_free(struct ctl_range *range);

/* Called for each response of a watch with events or a revision; the
 * events are the callee's to read, not to keep. Non-zero stops the watch
 * (ctl_etcd_watch then returns 0). */
typedef int (*ctl_watch_fn)(void *context, const struct ctl_watch_response *response);

/* Watches every key under prefix from start_revision, calling on_response
 * for each response, until *stop becomes non-zero (checked at least once a
 * second), on_response says stop, or the stream ends. 0 when stopped (by
 * *stop or on_response); -1 with the reason when the stream ended or
 * failed (member gone, a line past CTL_WATCH_LINE_BYTES_MAX, an answer the
 * codec refuses, the watch canceled: *compacted then says whether because
 * start_revision was compacted away). */
int ctl_etcd_watch(struct ctl_etcd *etcd, const char *prefix, int64_t start_revision,
                   ctl_watch_fn on_response, void *context, const int *stop, bool *compacted,
                   char *error, size_t error_size);

/* Whether the member a watch runs on answers a read of prefix (one key,
 * linearizable: a member cut off from its cluster's majority fails it)
 * within CTL_PROBE_TIMEOUT_MS: 0 (also when no watch runs), or -1 with
 * the reason (the next call then starts with the next member). A watch on a member that hangs
 * without closing its connection would otherwise wait for ever. */
int ctl_etcd_probe(struct ctl_etcd *etcd, const char *prefix, char *error, size_t error_size);

#endif
