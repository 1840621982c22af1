/* The store of the Keys API's keys: every key in creation order (revoked
 * ones too), hash tables from secret digest and from id to key, and its
 * files. A change is appended to keys.log (one line: the key as it is now,
 * with the change's sequence number) under one writer mutex, and waits in
 * the open batch; one fdatasync makes the whole batch durable (group
 * commit), and only then are its records put in force and its changes
 * answered, so that an answered change survives a crash. Once the log holds KEYS_LOG_LINES_MIN
 * lines more than there are keys, the whole store is written to keys.json as the registry writes
 * limits.json (keys.json.tmp, fsync, rename, fsync the directory) with the sequence it holds, and
 * the log is emptied: a change costs one short write, and the rewrites are amortised. At start
 * keys.json is loaded whole, then the log's lines after its sequence; a file cut short or not whole
 * JSON is refused, never half loaded. Lookups take a read lock only. */
#include "keys.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/hash.h"
#include "core/random.h"
#include "util/file.h"
#include "util/log.h"
#include "util/sha256.h"

/* Open addressing over digests: at most two per key (its secret and a
 * rotation's old one), so at most half the slots are ever taken. */
#define KEYS_TABLE_SLOTS (UINT32_C(1) << 19)
#define KEYS_SLOT_EMPTY 0u
#define KEYS_SLOT_GONE UINT32_MAX     /* a removed digest: probing goes on */
#define KEYS_SLOT_PREVIOUS (1u << 30) /* the slot is of the key's old secret */
_Static_assert(KEYS_TABLE_SLOTS >= 4 * KEYS_COUNT_MAX, "table at most half full");
/* Ids, never removed (a revoked key stays): at most 40% full. */
#define KEYS_ID_SLOTS (UINT32_C(1) << 18)
#define KEYS_NEW_ENTRY UINT32_MAX /* commit's entry index of a key being created */
_Static_assert(KEYS_ID_SLOTS >= 2 * KEYS_COUNT_MAX, "id table at most half full");

struct keys_entry {
    struct keys_record *record; /* the version in force */
    int64_t last_used_unix_ms;  /* atomic; 0: never */
    int64_t store_revision;     /* --control: the store's revision of record (writer mutex) */
};

/* A change written to keys.log, not yet synced: entry `index` becomes
 * `record` (the store's reference) once the batch's fdatasync is done. */
struct keys_pending {
    uint32_t index;
    struct keys_record *record;
    struct keys_record *old;    /* the version it replaced, released after */
    struct keys_ticket *ticket; /* NULL: the change's caller waits in commit */
};

struct keys {
    pthread_mutex_t writer; /* one change at a time, file included */
    pthread_rwlock_t lock;  /* entries' records and the table */
    struct keys_entry *entries;
    uint32_t count;
    uint32_t *slots;    /* entry index + 1 (| KEYS_SLOT_PREVIOUS), EMPTY or GONE */
    uint32_t gone;      /* GONE slots: the table is rebuilt past a quarter */
    uint32_t *id_slots; /* entry index + 1, or 0 */
    /* The files (writer mutex): the last change's sequence number, and
     * the log's size and lines; log_broken when a failed append or
     * emptying may have left it unsure (the next change rewrites
     * keys.json and empties it). */
    uint64_t sequence;
    int log_fd;
    uint64_t log_bytes;
    uint32_t log_lines;
    bool log_broken;
    /* The open batch (writer mutex): changes written, not yet synced, in
     * order; the new keys among them; whether a keys_sync is promised
     * (keys_sync_claim); and the files as they were before its first line. */
    struct keys_pending pending[KEYS_BATCH_MAX];
    uint32_t pending_count;
    uint32_t pending_creates;
    bool sync_claimed;
    uint64_t batch_sequence;
    uint64_t batch_bytes;
    uint32_t batch_lines;
    char dir[PATH_MAX];
    char path[PATH_MAX];
    char tmp_path[PATH_MAX];
    char log_path[PATH_MAX];
    /* --control: the shared store a change is written to first, and the
     * keys.log lines of keys followed from it, not yet written (writer
     * mutex). */
    keys_store_fn store;
    void *store_context;
    struct buffer followed;
    uint32_t followed_lines;
};

const char *keys_path(const struct keys *keys)
{
    return keys->path;
}

/* ---- the table --------------------------------------------------------------- */

static uint32_t slot_of(const uint8_t digest[GW_SHA256_BYTES])
{
    /* A SHA-256 is uniform: its first bytes are the hash. */
    uint32_t h;
    memcpy(&h, digest, sizeof h);
    return h & (KEYS_TABLE_SLOTS - 1);
}

static const uint8_t *slot_digest(const struct keys *keys, uint32_t value)
{
    const struct keys_record *r = keys->entries[(value & ~KEYS_SLOT_PREVIOUS) - 1].record;
    return (value & KEYS_SLOT_PREVIOUS) != 0 ? r->previous_sha256 : r->sha256;
}

/* The slot holding digest, or UINT32_MAX. */
static uint32_t table_find(const struct keys *keys, const uint8_t digest[GW_SHA256_BYTES])
{
    uint32_t at = slot_of(digest);
    for (uint32_t probes = 0; probes < KEYS_TABLE_SLOTS; probes++) {
        uint32_t value = keys->slots[at];
        if (value == KEYS_SLOT_EMPTY)
            return UINT32_MAX;
        if (value != KEYS_SLOT_GONE &&
            CRYPTO_memcmp(slot_digest(keys, value), digest, GW_SHA256_BYTES) == 0)
            return at;
        at = (at + 1) & (KEYS_TABLE_SLOTS - 1);
    }
    return UINT32_MAX;
}

static void table_insert(struct keys *keys, const uint8_t digest[GW_SHA256_BYTES], uint32_t value)
{
    uint32_t at = slot_of(digest);
    for (uint32_t probes = 0; probes < KEYS_TABLE_SLOTS; probes++) {
        uint32_t old = keys->slots[at];
        if (old == KEYS_SLOT_EMPTY || old == KEYS_SLOT_GONE) {
            keys->gone -= old == KEYS_SLOT_GONE;
            keys->slots[at] = value;
            return;
        }
        at = (at + 1) & (KEYS_TABLE_SLOTS - 1);
    }
    assert(!"the keys table is never full");
}

static void table_remove(struct keys *keys, const uint8_t digest[GW_SHA256_BYTES])
{
    uint32_t at = table_find(keys, digest);
    if (at == UINT32_MAX)
        return;
    keys->slots[at] = KEYS_SLOT_GONE;
    keys->gone++;
}

/* Every slot again from the entries (write lock held). */
static void table_rebuild(struct keys *keys)
{
    memset(keys->slots, 0, KEYS_TABLE_SLOTS * sizeof *keys->slots);
    keys->gone = 0;
    for (uint32_t i = 0; i < keys->count; i++) {
        const struct keys_record *r = keys->entries[i].record;
        table_insert(keys, r->sha256, i + 1);
        if (r->has_previous)
            table_insert(keys, r->previous_sha256, (i + 1) | KEYS_SLOT_PREVIOUS);
    }
}

static uint32_t id_slot(const char *id)
{
    /* Ids are made of random bytes: FNV-1a spreads them. */
    return (uint32_t)hash_fnv1a(id, strlen(id)) & (KEYS_ID_SLOTS - 1);
}

/* The entry index of id, or UINT32_MAX. */
static uint32_t index_of(const struct keys *keys, const char *id)
{
    uint32_t at = id_slot(id);
    for (uint32_t probes = 0; probes < KEYS_ID_SLOTS; probes++) {
        uint32_t value = keys->id_slots[at];
        if (value == 0)
            return UINT32_MAX;
        if (strcmp(keys->entries[value - 1].record->id, id) == 0)
            return value - 1;
        at = (at + 1) & (KEYS_ID_SLOTS - 1);
    }
    return UINT32_MAX;
}

static void id_insert(struct keys *keys, const char *id, uint32_t i)
{
    uint32_t at = id_slot(id);
    while (keys->id_slots[at] != 0)
        at = (at + 1) & (KEYS_ID_SLOTS - 1); /* never full: at most half */
    keys->id_slots[at] = i + 1;
}

/* Puts record in force as entry i (a new one when i == count), its
 * digests in the table; write lock held. The old version is returned to
 * be released outside the lock. */
static struct keys_record *install(struct keys *keys, uint32_t i, struct keys_record *record)
{
    assert(i <= keys->count);
    struct keys_record *old = NULL;
    if (i == keys->count) {
        keys->entries[i].record = record;
        keys->entries[i].last_used_unix_ms = 0;
        keys->count++;
        id_insert(keys, record->id, i);
    } else {
        old = keys->entries[i].record;
        if (old->has_previous)
            table_remove(keys, old->previous_sha256);
        table_remove(keys, old->sha256);
        keys->entries[i].record = record;
    }
    table_insert(keys, record->sha256, i + 1);
    if (record->has_previous)
        table_insert(keys, record->previous_sha256, (i + 1) | KEYS_SLOT_PREVIOUS);
    if (keys->gone > KEYS_TABLE_SLOTS / 4)
        table_rebuild(keys);
    return old;
}

/* ---- lookups ----------------------------------------------------------------- */

enum keys_verdict keys_lookup(struct keys *keys, const uint8_t digest[GW_SHA256_BYTES],
                              int64_t now_unix_ms, struct keys_record **out)
{
    *out = NULL;
    pthread_rwlock_rdlock(&keys->lock);
    uint32_t at = table_find(keys, digest);
    if (at == UINT32_MAX) {
        pthread_rwlock_unlock(&keys->lock);
        return KEYS_NOT_FOUND;
    }
    uint32_t value = keys->slots[at];
    struct keys_entry *entry = &keys->entries[(value & ~KEYS_SLOT_PREVIOUS) - 1];
    struct keys_record *r = entry->record;
    /* An old secret past its grace is no key's. */
    if ((value & KEYS_SLOT_PREVIOUS) != 0 && now_unix_ms >= r->previous_until_unix_ms) {
        pthread_rwlock_unlock(&keys->lock);
        return KEYS_NOT_FOUND;
    }
    enum keys_status status = keys_record_status(r, now_unix_ms);
    if (status == KEYS_ACTIVE) {
        keys_record_retain(r);
        *out = r;
        __atomic_store_n(&entry->last_used_unix_ms, now_unix_ms, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&keys->lock);
    switch (status) {
    case KEYS_ACTIVE:
        return KEYS_FOUND;
    case KEYS_BLOCKED:
        return KEYS_IS_BLOCKED;
    case KEYS_EXPIRED:
        return KEYS_IS_EXPIRED;
    case KEYS_REVOKED:
        break;
    }
    return KEYS_IS_REVOKED;
}

struct keys_record *keys_get(struct keys *keys, const char *id, int64_t *last_used_unix_ms)
{
    pthread_rwlock_rdlock(&keys->lock);
    uint32_t i = index_of(keys, id);
    struct keys_record *r = NULL;
    if (i != UINT32_MAX) {
        r = keys->entries[i].record;
        keys_record_retain(r);
        *last_used_unix_ms = __atomic_load_n(&keys->entries[i].last_used_unix_ms, __ATOMIC_RELAXED);
    }
    pthread_rwlock_unlock(&keys->lock);
    return r;
}

size_t keys_each(struct keys *keys, size_t from,
                 bool (*each)(const struct keys_record *record, int64_t last_used_unix_ms,
                              void *context),
                 void *context)
{
    pthread_rwlock_rdlock(&keys->lock);
    size_t i = from;
    for (; i < keys->count; i++) {
        const struct keys_entry *e = &keys->entries[i];
        if (!each(e->record, __atomic_load_n(&e->last_used_unix_ms, __ATOMIC_RELAXED), context))
            break;
    }
    if (i > keys->count)
        i = keys->count;
    pthread_rwlock_unlock(&keys->lock);
    return i;
}

/* ---- keys.json ----------------------------------------------------------------- */

static void encode_digest(struct buffer *b, const char *name, const uint8_t *digest)
{
    char hex[GW_SHA256_HEX_SIZE];
    gw_hex_encode(digest, GW_SHA256_BYTES, hex);
    buffer_append_str(b, name);
    buffer_append_json_string(b, hex, GW_SHA256_HEX_SIZE - 1);
}

/* One entry of keys.json: every field the record has (the digests only,
 * never a secret). */
static void encode_entry(struct buffer *b, const struct keys_record *r, int64_t last_used_unix_ms)
{
    buffer_append_str(b, "{\"id\":");
    buffer_append_json_string(b, r->id, strlen(r->id));
    encode_digest(b, ",\"sha256\":", r->sha256);
    encode_digest(b, ",\"first_sha256\":", r->key.sha256);
    if (r->has_previous) {
        encode_digest(b, ",\"previous_sha256\":", r->previous_sha256);
        buffer_append_str(b, ",\"previous_until_unix_ms\":");
        buffer_append_i64(b, r->previous_until_unix_ms);
    }
    buffer_append_str(b, ",\"caller\":");
    buffer_append_json_string(b, r->caller, strlen(r->caller));
    buffer_append_str(b, ",\"team\":");
    buffer_append_json_string(b, r->team, strlen(r->team));
    buffer_append_str(b, ",\"models\":");
    for (uint32_t i = 0; i < r->model_count; i++) {
        buffer_append_char(b, i == 0 ? '[' : ',');
        buffer_append_json_string(b, r->models[i], strlen(r->models[i]));
    }
    buffer_append_str(b, r->model_count > 0 ? "]" : "null");
    buffer_append_str(b, ",\"mcp_servers\":");
    keys_append_mcp_servers(b, r);
    buffer_append_str(b, ",\"metadata\":{");
    for (uint32_t i = 0; i < r->metadata_count; i++) {
        if (i > 0)
            buffer_append_char(b, ',');
        buffer_append_json_string(b, r->metadata_names[i], strlen(r->metadata_names[i]));
        buffer_append_char(b, ':');
        buffer_append_json_string(b, r->metadata_values[i], strlen(r->metadata_values[i]));
    }
    buffer_append_str(b, "},\"created_at_unix_ms\":");
    buffer_append_i64(b, r->created_at_unix_ms);
    buffer_append_str(b, ",\"expires_at_unix_ms\":");
    if (r->expires_at_unix_ms != 0)
        buffer_append_i64(b, r->expires_at_unix_ms);
    else
        buffer_append_str(b, "null");
    buffer_append_str(b, ",\"revoked_at_unix_ms\":");
    buffer_append_i64(b, r->revoked_at_unix_ms);
    buffer_append_str(b, ",\"last_used_unix_ms\":");
    buffer_append_i64(b, last_used_unix_ms);
    buffer_append_str(b, r->blocked ? ",\"blocked\":true" : ",\"blocked\":false");
    buffer_append_str(b, ",\"max_wait_seconds\":");
    buffer_append_u64(b, r->max_wait_seconds);
    buffer_append_str(b, ",\"priority_floor\":");
    buffer_append_u64(b, r->priority_floor);
    buffer_append_char(b, '}');
}

/* The whole file with entry i replaced by `record` (appended when i ==
 * count), one key per line. Writer mutex held: no entry changes. */
static void encode_file(const struct keys *keys, uint32_t i, const struct keys_record *record,
                        struct buffer *b)
{
    buffer_append_str(b, "{\"version\":1,\"sequence\":");
    buffer_append_u64(b, keys->sequence + 1);
    buffer_append_str(b, ",\"keys\":[\n");
    uint32_t total = i == keys->count ? keys->count + 1 : keys->count;
    for (uint32_t k = 0; k < total; k++) {
        const struct keys_record *r = k == i ? record : keys->entries[k].record;
        int64_t used = k < keys->count
                           ? __atomic_load_n(&keys->entries[k].last_used_unix_ms, __ATOMIC_RELAXED)
                           : 0;
        encode_entry(b, r, used);
        buffer_append_str(b, k + 1 < total ? ",\n" : "\n");
    }
    buffer_append_str(b, "]}\n");
}

static int write_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

/* tmp, fsync, rename, fsync the directory; NULL or the step that failed. */
static const char *write_atomically(const struct keys *keys, const struct buffer *b)
{
    int fd = open(keys->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return "open";
    const char *step = NULL;
    if (write_all(fd, b->data, b->length) != 0)
        step = "write";
    else if (fsync(fd) != 0)
        step = "fsync";
    if (close(fd) != 0 && step == NULL)
        step = "close";
    if (step == NULL && rename(keys->tmp_path, keys->path) != 0)
        step = "rename";
    if (step != NULL)
        return step;
    int dir = open(keys->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return "open directory";
    if (fsync(dir) != 0)
        step = "fsync directory";
    close(dir);
    return step;
}

/* Appends the change (its sequence and the key as it is now) to
 * keys.log, unsynced (batch_sync syncs it); NULL, or the step that failed
 * (the log is cut back to where it was, or marked broken). */
static const char *log_write_line(struct keys *keys, uint32_t i, const struct keys_record *record)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"sequence\":");
    buffer_append_u64(&b, keys->sequence + 1);
    buffer_append_str(&b, ",\"key\":");
    encode_entry(&b, record,
                 i < keys->count
                     ? __atomic_load_n(&keys->entries[i].last_used_unix_ms, __ATOMIC_RELAXED)
                     : 0);
    buffer_append_str(&b, "}\n");
    const char *step = NULL;
    if (b.failed) {
        step = "encode";
        errno = ENOMEM;
    } else if (write_all(keys->log_fd, b.data, b.length) != 0) {
        step = "write";
    }
    int saved_errno = errno;
    if (step == NULL) {
        keys->log_bytes += b.length;
        keys->log_lines++;
    } else {
        /* Whatever reached the file is cut off (the batch's lines before
         * it stay); the next change rewrites keys.json whole. */
        if (ftruncate(keys->log_fd, (off_t)keys->log_bytes) != 0)
            log_write(LOG_ERROR, "keys log not cut back after a failed write", "file",
                      keys->log_path, NULL);
        keys->log_broken = true;
    }
    buffer_free(&b);
    errno = saved_errno;
    return step;
}

/* The open batch made durable by one fdatasync, then its records put in
 * force in order and each change's ticket told (writer mutex held: a
 * ticket's done must not change keys). A failed fdatasync fails the whole
 * batch: the log is cut back to where it was before it (and marked broken:
 * a failed fdatasync may have lost earlier pages too), nothing changes.
 * Returns the batch's outcome. */
static enum keys_outcome batch_sync(struct keys *keys)
{
    if (keys->pending_count == 0)
        return KEYS_OK;
    enum keys_outcome outcome = KEYS_OK;
    if (fdatasync(keys->log_fd) != 0) {
        log_write(LOG_ERROR, "keys file write failed: the changes are not made", "file",
                  keys->log_path, "step", "fdatasync", "reason", strerror(errno), NULL);
        if (ftruncate(keys->log_fd, (off_t)keys->batch_bytes) != 0)
            log_write(LOG_ERROR, "keys log not cut back after a failed write", "file",
                      keys->log_path, NULL);
        keys->log_broken = true;
        keys->sequence = keys->batch_sequence;
        keys->log_bytes = keys->batch_bytes;
        keys->log_lines = keys->batch_lines;
        outcome = KEYS_WRITE_FAILED;
    } else {
        pthread_rwlock_wrlock(&keys->lock);
        for (uint32_t k = 0; k < keys->pending_count; k++) {
            struct keys_pending *p = &keys->pending[k];
            p->old = install(keys, p->index, p->record);
        }
        pthread_rwlock_unlock(&keys->lock);
    }
    uint32_t count = keys->pending_count;
    keys->pending_count = 0;
    keys->pending_creates = 0;
    for (uint32_t k = 0; k < count; k++) {
        struct keys_pending *p = &keys->pending[k];
        keys_record_release(p->old);
        p->old = NULL;
        struct keys_ticket *ticket = p->ticket;
        if (ticket == NULL) {
            if (outcome != KEYS_OK)
                keys_record_release(p->record);
            continue;
        }
        ticket->outcome = outcome;
        ticket->record = outcome == KEYS_OK ? p->record : NULL;
        if (outcome == KEYS_OK)
            keys_record_retain(p->record);
        else
            keys_record_release(p->record);
        ticket->done(ticket);
    }
    return outcome;
}

/* keys.json rewritten whole with entry i as record, then keys.log emptied;
 * NULL, or the step that failed (keys.json is the old one). A log that
 * cannot be emptied holds lines keys.json has already: their sequences
 * are past, and the next start skips them. */
static const char *compact(struct keys *keys, uint32_t i, const struct keys_record *record)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    b.capacity_max = KEYS_FILE_BYTES_MAX;
    encode_file(keys, i, record, &b);
    const char *step = b.failed ? "encode" : write_atomically(keys, &b);
    if (b.failed)
        errno = ENOMEM;
    buffer_free(&b);
    if (step != NULL)
        return step;
    keys->log_broken = ftruncate(keys->log_fd, 0) != 0 || fsync(keys->log_fd) != 0;
    if (keys->log_broken)
        log_write(LOG_WARN, "keys log not emptied: emptied at the next change", "file",
                  keys->log_path, "reason", strerror(errno), NULL);
    keys->log_bytes = 0;
    keys->log_lines = 0;
    return NULL;
}

/* keys.json rewritten with entry i as record, then record in force (no
 * batch open). Writer mutex held; record is the caller's reference. */
static enum keys_outcome commit_rewrite(struct keys *keys, uint32_t i, struct keys_record *record,
                                        struct keys_record **out)
{
    assert(keys->pending_count == 0);
    const char *step = compact(keys, i, record);
    if (step != NULL) {
        log_write(LOG_ERROR, "keys file write failed: the change is not made", "file", keys->path,
                  "step", step, "reason", strerror(errno), NULL);
        keys_record_release(record);
        return KEYS_WRITE_FAILED;
    }
    keys->sequence++;
    pthread_rwlock_wrlock(&keys->lock);
    struct keys_record *old = install(keys, i, record);
    pthread_rwlock_unlock(&keys->lock);
    keys_record_release(old);
    keys_record_retain(record);
    *out = record;
    return KEYS_OK;
}

static void followed_write(struct keys *keys);

/* With a shared store (--control): the change (entry i as record; i ==
 * KEYS_NEW_ENTRY: a new key) written to the store first, then to keys.log
 * with its own fdatasync (no batch: the store's write is the one an answer
 * waits for, and the next change's base revision must be this one's), then
 * in force. A change the store took is in force here even if keys.log then
 * fails (logged; keys.json is rewritten at the next change). Writer mutex
 * held; record is the caller's reference, taken (released on failure). */
static enum keys_outcome commit_stored(struct keys *keys, uint32_t i, struct keys_record *record,
                                       struct keys_record **out)
{
    assert(keys->pending_count == 0);
    uint32_t index = i == KEYS_NEW_ENTRY ? keys->count : i;
    int64_t revision = 0;
    enum keys_outcome stored =
        keys->store(keys->store_context, record,
                    index < keys->count ? keys->entries[index].store_revision : 0, &revision);
    if (stored != KEYS_OK) {
        keys_record_release(record);
        return stored;
    }
    followed_write(keys); /* lines before this one keep their order */
    bool rewrite = keys->log_broken || keys->log_lines >= KEYS_LOG_LINES_MIN + keys->count + 1;
    const char *step = rewrite ? compact(keys, index, record) : log_write_line(keys, index, record);
    if (step == NULL && !rewrite && fdatasync(keys->log_fd) != 0)
        step = "fdatasync";
    if (step != NULL) {
        log_write(LOG_ERROR,
                  "keys file write failed: the change is in force (in the shared store), "
                  "keys.json is rewritten at the next one",
                  "file", rewrite ? keys->path : keys->log_path, "step", step, "reason",
                  strerror(errno), NULL);
        keys->log_broken = true;
    }
    keys->sequence++;
    pthread_rwlock_wrlock(&keys->lock);
    struct keys_record *old = install(keys, index, record);
    keys->entries[index].store_revision = revision;
    pthread_rwlock_unlock(&keys->lock);
    keys_record_release(old);
    keys_record_retain(record);
    *out = record;
    return KEYS_OK;
}

/* The change (entry i as record; i == KEYS_NEW_ENTRY: a new key) written
 * to keys.log in the open batch. With a ticket: KEYS_PENDING, and the
 * ticket is told once the batch is synced (keys_sync); without one, the
 * batch is synced here. Writer mutex held; record is the caller's
 * reference, taken (released on failure); *out: the record, retained. */
static enum keys_outcome commit(struct keys *keys, uint32_t i, struct keys_record *record,
                                struct keys_ticket *ticket, struct keys_record **out)
{
    if (keys->store != NULL)
        return commit_stored(keys, i, record, out);
    uint32_t total = keys->count + keys->pending_creates + (i == KEYS_NEW_ENTRY);
    bool rewrite = keys->log_broken || keys->log_lines >= KEYS_LOG_LINES_MIN + total;
    if ((rewrite || keys->pending_count == KEYS_BATCH_MAX) && batch_sync(keys) != KEYS_OK) {
        keys_record_release(record); /* it may build on a change that failed */
        return KEYS_WRITE_FAILED;
    }
    uint32_t index = i == KEYS_NEW_ENTRY ? keys->count + keys->pending_creates : i;
    if (rewrite)
        return commit_rewrite(keys, index, record, out);
    if (keys->pending_count == 0) {
        keys->batch_sequence = keys->sequence;
        keys->batch_bytes = keys->log_bytes;
        keys->batch_lines = keys->log_lines;
    }
    const char *step = log_write_line(keys, index, record);
    if (step != NULL) {
        log_write(LOG_ERROR, "keys file write failed: the change is not made", "file",
                  keys->log_path, "step", step, "reason", strerror(errno), NULL);
        keys_record_release(record);
        return KEYS_WRITE_FAILED;
    }
    keys->sequence++;
    assert(keys->pending_count < KEYS_BATCH_MAX);
    keys->pending[keys->pending_count++] = (struct keys_pending){index, record, NULL, ticket};
    keys->pending_creates += i == KEYS_NEW_ENTRY;
    if (ticket != NULL)
        return KEYS_PENDING;
    enum keys_outcome outcome = batch_sync(keys);
    if (outcome == KEYS_OK) {
        keys_record_retain(record);
        *out = record;
    }
    return outcome;
}

/* Entry i as the next change must see it: its newest pending version, or
 * the one in force. Writer mutex held. */
static struct keys_record *newest(const struct keys *keys, uint32_t i, bool *pending)
{
    for (uint32_t k = keys->pending_count; k > 0; k--) {
        if (keys->pending[k - 1].index == i) {
            *pending = true;
            return keys->pending[k - 1].record;
        }
    }
    *pending = false;
    return keys->entries[i].record;
}

bool keys_sync_claim(struct keys *keys)
{
    pthread_mutex_lock(&keys->writer);
    bool first = keys->pending_count > 0 && !keys->sync_claimed;
    if (first)
        keys->sync_claimed = true;
    pthread_mutex_unlock(&keys->writer);
    return first;
}

void keys_sync(struct keys *keys)
{
    pthread_mutex_lock(&keys->writer);
    keys->sync_claimed = false;
    batch_sync(keys);
    pthread_mutex_unlock(&keys->writer);
}

/* ---- loading --------------------------------------------------------------------- */

/* The key of a keys.json entry or a keys.log line into draft; error
 * "<file>: line L: <where>: <reason>". */
static int read_key(const char *file, const struct jdoc_value *item, const char *where,
                    struct keys_draft *draft, char *error, size_t error_size)
{
    char reason[256];
    memset(draft, 0, sizeof *draft);
    if (keys_draft_apply(draft, item, KEYS_FIELDS_FILE, reason, sizeof reason) == 0)
        return 0;
    snprintf(error, error_size, "%s: line %u: %s: %s", file, item->line, where, reason);
    return -1;
}

/* Whether digest is no key's but entry i's. */
static bool digest_free(const struct keys *keys, const uint8_t digest[GW_SHA256_BYTES], uint32_t i)
{
    uint32_t at = table_find(keys, digest);
    return at == UINT32_MAX || (keys->slots[at] & ~KEYS_SLOT_PREVIOUS) - 1 == i;
}

/* Puts draft in force as the key of its id (a new one when none has it),
 * as a start replays keys.json and the log. 0, or -1 with error. */
static int load_key(struct keys *keys, const char *file, uint32_t line, const char *where,
                    const struct keys_draft *draft, char *error, size_t error_size)
{
    uint32_t i = index_of(keys, draft->id);
    if (i == UINT32_MAX)
        i = keys->count;
    if (i == KEYS_COUNT_MAX) {
        snprintf(error, error_size, "%s: line %u: %s: more than %d keys", file, line, where,
                 KEYS_COUNT_MAX);
        return -1;
    }
    if (!digest_free(keys, draft->sha256, i) ||
        (draft->has_previous && !digest_free(keys, draft->previous_sha256, i))) {
        snprintf(error, error_size, "%s: line %u: %s: sha256 of another key", file, line, where);
        return -1;
    }
    struct keys_record *r = keys_record_new(draft);
    if (r == NULL) {
        snprintf(error, error_size, "%s: out of memory", file);
        return -1;
    }
    keys_record_release(install(keys, i, r));
    keys->entries[i].last_used_unix_ms = draft->last_used_unix_ms;
    return 0;
}

static int load_snapshot(struct keys *keys, const struct jdoc_value *root, struct keys_draft *draft,
                         char *error, size_t error_size)
{
    const struct jdoc_value *list = jdoc_get(root, "keys");
    const struct jdoc_value *version = jdoc_get(root, "version");
    const struct jdoc_value *sequence = jdoc_get(root, "sequence");
    if (!jdoc_is(list, JDOC_ARRAY) || list->count > KEYS_COUNT_MAX ||
        !jdoc_is(version, JDOC_INTEGER) || version->as.integer != 1 ||
        (sequence != NULL && (!jdoc_is(sequence, JDOC_INTEGER) || sequence->as.integer < 0))) {
        snprintf(error, error_size,
                 "%s: line 1: must be {\"version\":1,\"sequence\":N,\"keys\":[...]} with at "
                 "most %d keys",
                 keys->path, KEYS_COUNT_MAX);
        return -1;
    }
    keys->sequence = sequence != NULL ? (uint64_t)sequence->as.integer : 0;
    for (uint32_t i = 0; i < list->count; i++) {
        const struct jdoc_value *item = &list->as.items[i];
        char where[32];
        snprintf(where, sizeof where, "keys[%u]", i);
        if (read_key(keys->path, item, where, draft, error, error_size) != 0)
            return -1;
        if (index_of(keys, draft->id) != UINT32_MAX) {
            snprintf(error, error_size, "%s: line %u: %s: id %s twice", keys->path, item->line,
                     where, draft->id);
            return -1;
        }
        if (load_key(keys, keys->path, item->line, where, draft, error, error_size) != 0)
            return -1;
    }
    return 0;
}

/* One line of keys.log: a change after keys.json's sequence is put in
 * force, one it holds already is passed over; sequences only grow. */
static int load_log_line(struct keys *keys, char *text, size_t length, uint32_t line,
                         struct arena *arena, struct keys_draft *draft, char *error,
                         size_t error_size)
{
    struct jdoc_value *root = NULL;
    char reason[256], where[32];
    snprintf(where, sizeof where, "line %u", line);
    if (jdoc_parse(text, length, arena, &root, reason, sizeof reason) != 0) {
        snprintf(error, error_size, "%s: line %u: %s (refused)", keys->log_path, line, reason);
        return -1;
    }
    const struct jdoc_value *sequence = jdoc_get(root, "sequence");
    const struct jdoc_value *key = jdoc_get(root, "key");
    if (!jdoc_is(sequence, JDOC_INTEGER) || sequence->as.integer <= 0 ||
        !jdoc_is(key, JDOC_OBJECT)) {
        snprintf(error, error_size, "%s: line %u: must be {\"sequence\":N,\"key\":{...}}",
                 keys->log_path, line);
        return -1;
    }
    uint64_t n = (uint64_t)sequence->as.integer;
    if (n <= keys->sequence)
        return 0; /* keys.json holds it (the log was not emptied after a rewrite) */
    if (n != keys->sequence + 1) {
        snprintf(error, error_size, "%s: line %u: sequence %llu after %llu (refused)",
                 keys->log_path, line, (unsigned long long)n, (unsigned long long)keys->sequence);
        return -1;
    }
    if (read_key(keys->log_path, key, "key", draft, error, error_size) != 0 ||
        load_key(keys, keys->log_path, line, "key", draft, error, error_size) != 0)
        return -1;
    keys->sequence = n;
    return 0;
}

/* keys.log's lines in order; the last must end with its newline (one cut
 * short is a write a crash interrupted: refused, as a torn keys.json is). */
static int load_log(struct keys *keys, char *text, size_t length, struct keys_draft *draft,
                    char *error, size_t error_size)
{
    struct arena arena;
    arena_init(&arena, NULL, 0);
    int result = 0;
    uint32_t line = 0;
    size_t at = 0;
    while (result == 0 && at < length) {
        char *end = memchr(text + at, '\n', length - at);
        line++;
        if (end == NULL) {
            snprintf(error, error_size, "%s: line %u: cut short (a torn write): refused",
                     keys->log_path, line);
            result = -1;
            break;
        }
        result = load_log_line(keys, text + at, (size_t)(end - (text + at)), line, &arena, draft,
                               error, error_size);
        arena_reset(&arena);
        at = (size_t)(end - text) + 1;
    }
    arena_free(&arena);
    keys->log_lines = line;
    keys->log_bytes = length;
    return result;
}

/* Reads path whole and hands it to load (document: parsed first). 0 when
 * there is no such file. */
static int load_file(struct keys *keys, const char *path, bool document, struct keys_draft *draft,
                     char *error, size_t error_size)
{
    char *text = NULL;
    size_t length = 0;
    int found = file_read_all(path, KEYS_FILE_BYTES_MAX, &text, &length, error, error_size);
    if (found != 0)
        return found > 0 ? 0 : -1;
    int result;
    if (document) {
        struct arena arena;
        arena_init(&arena, NULL, 0);
        struct jdoc_value *root = NULL;
        char reason[256];
        result = jdoc_parse(text, length, &arena, &root, reason, sizeof reason);
        if (result != 0)
            snprintf(error, error_size, "%s: %s (a torn or edited file: refused)", path, reason);
        else
            result = load_snapshot(keys, root, draft, error, error_size);
        arena_free(&arena);
    } else {
        result = load_log(keys, text, length, draft, error, error_size);
    }
    free(text);
    return result;
}

static int keys_load(struct keys *keys, char *error, size_t error_size)
{
    if (unlink(keys->tmp_path) == 0)
        log_write(LOG_WARN, "removed a stale keys file (a rewrite was cut short)", "file",
                  keys->tmp_path, NULL);
    struct keys_draft *draft = malloc(sizeof *draft);
    if (draft == NULL) {
        snprintf(error, error_size, "%s: out of memory", keys->path);
        return -1;
    }
    int result = load_file(keys, keys->path, true, draft, error, error_size);
    if (result == 0)
        result = load_file(keys, keys->log_path, false, draft, error, error_size);
    free(draft);
    if (result != 0)
        return -1;
    keys->log_fd = open(keys->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int dir = keys->log_fd >= 0 ? open(keys->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dir < 0 || fsync(dir) != 0) { /* the log's name durable before a line is in it */
        snprintf(error, error_size, "%s: cannot be opened: %s", keys->log_path, strerror(errno));
        result = -1;
    }
    if (dir >= 0)
        close(dir);
    return result;
}

static void free_entries(struct keys *keys)
{
    for (uint32_t i = 0; i < keys->count; i++)
        keys_record_release(keys->entries[i].record);
    keys->count = 0;
}

int keys_open(const char *data_dir, struct keys **out, char *error, size_t error_size)
{
    *out = NULL;
    struct keys *keys = calloc(1, sizeof *keys);
    if (keys != NULL) {
        keys->entries = calloc(KEYS_COUNT_MAX, sizeof *keys->entries);
        keys->slots = calloc(KEYS_TABLE_SLOTS, sizeof *keys->slots);
        keys->id_slots = calloc(KEYS_ID_SLOTS, sizeof *keys->id_slots);
        keys->log_fd = -1;
        buffer_init(&keys->followed, NULL, 0);
        keys->followed.capacity_max = KEYS_FILE_BYTES_MAX;
    }
    if (keys == NULL || keys->entries == NULL || keys->slots == NULL || keys->id_slots == NULL) {
        keys_close(keys);
        snprintf(error, error_size, "out of memory");
        return -1;
    }
    pthread_mutex_init(&keys->writer, NULL);
    pthread_rwlock_init(&keys->lock, NULL);
    int n1 = snprintf(keys->dir, sizeof keys->dir, "%s", data_dir);
    int n2 = snprintf(keys->path, sizeof keys->path, "%s/keys.json", data_dir);
    int n3 = snprintf(keys->tmp_path, sizeof keys->tmp_path, "%s/keys.json.tmp", data_dir);
    int n4 = snprintf(keys->log_path, sizeof keys->log_path, "%s/keys.log", data_dir);
    if (n1 < 0 || n2 < 0 || n3 < 0 || (size_t)n3 >= sizeof keys->tmp_path || n4 < 0 ||
        (size_t)n4 >= sizeof keys->log_path) {
        snprintf(error, error_size, "%s: path too long", data_dir);
        keys_close(keys);
        return -1;
    }
    if (keys_load(keys, error, error_size) != 0) {
        keys_close(keys);
        return -1;
    }
    *out = keys;
    return 0;
}

void keys_close(struct keys *keys)
{
    if (keys == NULL)
        return;
    if (keys->entries != NULL) {
        for (uint32_t k = 0; k < keys->pending_count; k++) /* never synced: never answered */
            keys_record_release(keys->pending[k].record);
        free_entries(keys);
        pthread_mutex_destroy(&keys->writer);
        pthread_rwlock_destroy(&keys->lock);
    }
    if (keys->log_fd >= 0)
        close(keys->log_fd);
    buffer_free(&keys->followed);
    free(keys->entries);
    free(keys->slots);
    free(keys->id_slots);
    free(keys);
}

/* ---- changes --------------------------------------------------------------------- */

/* A new secret into secret_out and its digest into digest; 0 or -1. */
static int new_secret(char secret_out[GW_SECRET_SIZE], uint8_t digest[GW_SHA256_BYTES])
{
    char hex[GW_SHA256_HEX_SIZE];
    if (gw_secret_new(secret_out, hex) != 0)
        return -1;
    return gw_hex_decode(hex, GW_SHA256_HEX_SIZE - 1, digest, GW_SHA256_BYTES);
}

enum keys_outcome keys_create(struct keys *keys, const struct keys_draft *draft,
                              int64_t now_unix_ms, char secret_out[GW_SECRET_SIZE],
                              struct keys_record **out, struct keys_ticket *ticket)
{
    *out = NULL;
    struct keys_draft *d = malloc(sizeof *d);
    if (d == NULL)
        return KEYS_NO_MEMORY;
    memcpy(d, draft, sizeof *d);
    uint8_t id_bytes[8];
    char id_hex[17];
    if (random_fill(id_bytes, sizeof id_bytes) != 0 || new_secret(secret_out, d->sha256) != 0) {
        free(d);
        return KEYS_NO_RANDOMNESS;
    }
    gw_hex_encode(id_bytes, sizeof id_bytes, id_hex);
    snprintf(d->id, sizeof d->id, "%s%s", KEYS_ID_PREFIX, id_hex);
    memcpy(d->first_sha256, d->sha256, GW_SHA256_BYTES);
    d->has_previous = false;
    d->created_at_unix_ms = now_unix_ms > 0 ? now_unix_ms : 1;
    d->revoked_at_unix_ms = 0;
    d->blocked = false;
    struct keys_record *r = keys_record_new(d);
    free(d);
    if (r == NULL)
        return KEYS_NO_MEMORY;
    pthread_mutex_lock(&keys->writer);
    enum keys_outcome outcome = KEYS_FULL;
    if (keys->count + keys->pending_creates < KEYS_COUNT_MAX)
        outcome = commit(keys, KEYS_NEW_ENTRY, r, ticket, out);
    else
        keys_record_release(r);
    pthread_mutex_unlock(&keys->writer);
    return outcome;
}

/* A change of key id: change(draft, context) edits a copy of its fields
 * (its newest version, pending or in force); the result is written and
 * put in force. Writer mutex taken here. An answer read from a version
 * still pending (the key revoked by a change not yet synced) waits for
 * that version's sync. */
static enum keys_outcome change_key(struct keys *keys, const char *id,
                                    enum keys_outcome (*change)(struct keys_draft *, void *),
                                    void *context, struct keys_record **out,
                                    struct keys_ticket *ticket)
{
    *out = NULL;
    struct keys_draft *d = malloc(sizeof *d);
    if (d == NULL)
        return KEYS_NO_MEMORY;
    pthread_mutex_lock(&keys->writer);
    uint32_t i = index_of(keys, id); /* the writer alone changes entries: no lock needed */
    enum keys_outcome outcome = i == UINT32_MAX ? KEYS_UNKNOWN : KEYS_OK;
    bool pending = false;
    if (outcome == KEYS_OK) {
        keys_draft_from(d, newest(keys, i, &pending));
        outcome = change(d, context);
    }
    if (outcome == KEYS_OK) {
        struct keys_record *r = keys_record_new(d);
        outcome = r == NULL ? KEYS_NO_MEMORY : commit(keys, i, r, ticket, out);
    } else if (pending && batch_sync(keys) != KEYS_OK) {
        outcome = KEYS_WRITE_FAILED;
    }
    if (outcome == KEYS_IS_GONE) { /* nothing to change: the key as it is */
        *out = keys->entries[i].record;
        keys_record_retain(*out);
    }
    pthread_mutex_unlock(&keys->writer);
    free(d);
    return outcome;
}

static enum keys_outcome apply_update(struct keys_draft *d, void *context)
{
    if (d->revoked_at_unix_ms != 0)
        return KEYS_IS_GONE;
    char error[256];
    /* checked already by the handler: it cannot fail here */
    int rc = keys_draft_apply(d, context, KEYS_FIELDS_UPDATE, error, sizeof error);
    assert(rc == 0);
    (void)rc;
    return KEYS_OK;
}

enum keys_outcome keys_update(struct keys *keys, const char *id, const struct jdoc_value *body,
                              struct keys_record **out, struct keys_ticket *ticket)
{
    return change_key(keys, id, apply_update, (void *)body, out, ticket);
}

static enum keys_outcome apply_revoke(struct keys_draft *d, void *context)
{
    if (d->revoked_at_unix_ms != 0)
        return KEYS_IS_GONE;
    int64_t now_unix_ms = *(const int64_t *)context;
    d->revoked_at_unix_ms = now_unix_ms > 0 ? now_unix_ms : 1;
    return KEYS_OK;
}

enum keys_outcome keys_revoke(struct keys *keys, const char *id, int64_t now_unix_ms,
                              struct keys_record **out, struct keys_ticket *ticket)
{
    enum keys_outcome outcome = change_key(keys, id, apply_revoke, &now_unix_ms, out, ticket);
    return outcome == KEYS_IS_GONE ? KEYS_OK : outcome; /* revoked already: as asked */
}

struct rotation {
    int64_t now_unix_ms;
    uint32_t grace_seconds;
    char *secret_out;
};

static enum keys_outcome apply_rotate(struct keys_draft *d, void *context)
{
    const struct rotation *rotation = context;
    if (d->revoked_at_unix_ms != 0)
        return KEYS_IS_GONE;
    uint8_t digest[GW_SHA256_BYTES];
    if (new_secret(rotation->secret_out, digest) != 0)
        return KEYS_NO_RANDOMNESS;
    d->has_previous = rotation->grace_seconds > 0;
    memcpy(d->previous_sha256, d->sha256, GW_SHA256_BYTES);
    d->previous_until_unix_ms = rotation->now_unix_ms + (int64_t)rotation->grace_seconds * 1000;
    if (!d->has_previous) {
        memset(d->previous_sha256, 0, GW_SHA256_BYTES);
        d->previous_until_unix_ms = 0;
    }
    memcpy(d->sha256, digest, GW_SHA256_BYTES);
    return KEYS_OK;
}

enum keys_outcome keys_rotate(struct keys *keys, const char *id, uint32_t grace_seconds,
                              int64_t now_unix_ms, char secret_out[GW_SECRET_SIZE],
                              struct keys_record **out, struct keys_ticket *ticket)
{
    assert(grace_seconds <= KEYS_GRACE_SECONDS_MAX);
    struct rotation rotation = {now_unix_ms, grace_seconds, secret_out};
    return change_key(keys, id, apply_rotate, &rotation, out, ticket);
}

/* ---- a shared store (--control) ---------------------------------------------------- */

void keys_set_store(struct keys *keys, keys_store_fn store, void *context)
{
    pthread_mutex_lock(&keys->writer);
    keys->store = store;
    keys->store_context = context;
    pthread_mutex_unlock(&keys->writer);
}

int keys_publish(struct keys *keys, const char *id)
{
    pthread_mutex_lock(&keys->writer);
    uint32_t i = index_of(keys, id);
    int result = 0;
    if (i == UINT32_MAX || keys->store == NULL) {
        result = 0;
    } else if (keys->entries[i].store_revision != 0) {
        log_write(LOG_WARN, "control plane: a key deleted from the store is kept here as it was",
                  "id", id, NULL);
    } else {
        int64_t revision = 0;
        enum keys_outcome stored =
            keys->store(keys->store_context, keys->entries[i].record, 0, &revision);
        if (stored == KEYS_OK) {
            pthread_rwlock_wrlock(&keys->lock);
            keys->entries[i].store_revision = revision;
            pthread_rwlock_unlock(&keys->lock);
            log_write(LOG_INFO, "control plane: a key made here written to the store", "id", id,
                      NULL);
        }
        /* Another front end's creation came first: the watch brings it. */
        result = stored == KEYS_OK || stored == KEYS_CHANGED_ELSEWHERE ? 0 : -1;
    }
    pthread_mutex_unlock(&keys->writer);
    return result;
}

size_t keys_ids(struct keys *keys, char ***ids)
{
    pthread_rwlock_rdlock(&keys->lock);
    size_t count = keys->count;
    char **out = calloc(count + 1, sizeof *out);
    for (size_t i = 0; out != NULL && i < count; i++) {
        out[i] = strdup(keys->entries[i].record->id);
        if (out[i] == NULL) {
            for (size_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            out = NULL;
        }
    }
    pthread_rwlock_unlock(&keys->lock);
    *ids = out;
    return out != NULL ? count : 0;
}

void keys_store_encode(struct buffer *b, const struct keys_record *record)
{
    encode_entry(b, record, 0);
}

/* Whether two records hold the same key (last use aside). */
static bool same_record(const struct keys_record *a, const struct keys_record *b)
{
    struct buffer x, y;
    buffer_init(&x, NULL, 0);
    buffer_init(&y, NULL, 0);
    encode_entry(&x, a, 0);
    encode_entry(&y, b, 0);
    bool same =
        !x.failed && !y.failed && x.length == y.length && memcmp(x.data, y.data, x.length) == 0;
    buffer_free(&x);
    buffer_free(&y);
    return same;
}

/* The followed keys' lines to keys.log, one fdatasync (or keys.json
 * whole, when the log is long or broken). Writer mutex held. */
static void followed_write(struct keys *keys)
{
    if (keys->followed_lines == 0 && !keys->followed.failed)
        return;
    const char *step = NULL;
    bool rewrite = keys->followed.failed || keys->log_broken ||
                   keys->log_lines + keys->followed_lines >= KEYS_LOG_LINES_MIN + keys->count;
    if (rewrite) {
        step = keys->count > 0 ? compact(keys, 0, keys->entries[0].record) : NULL;
    } else if (write_all(keys->log_fd, keys->followed.data, keys->followed.length) != 0) {
        step = "write";
    } else if (fdatasync(keys->log_fd) != 0) {
        step = "fdatasync";
    }
    if (step == NULL && !rewrite) {
        keys->log_bytes += keys->followed.length;
        keys->log_lines += keys->followed_lines;
    } else if (step == NULL) {
        keys->sequence++; /* the sequence keys.json now holds */
    } else if (step != NULL) {
        log_write(LOG_ERROR,
                  "keys file write failed: keys followed from the store are in force, "
                  "keys.json is rewritten at the next change",
                  "step", step, "reason", strerror(errno), NULL);
        if (!rewrite && ftruncate(keys->log_fd, (off_t)keys->log_bytes) != 0)
            log_write(LOG_ERROR, "keys log not cut back after a failed write", "file",
                      keys->log_path, NULL);
        keys->log_broken = true;
    }
    keys->followed.length = 0;
    keys->followed.failed = false;
    keys->followed_lines = 0;
}

void keys_follow_flush(struct keys *keys)
{
    pthread_mutex_lock(&keys->writer);
    followed_write(keys);
    pthread_mutex_unlock(&keys->writer);
}

/* Puts r in force as entry i (writer mutex held) and queues its line. */
static void follow_install(struct keys *keys, uint32_t i, struct keys_record *r, int64_t revision)
{
    buffer_append_str(&keys->followed, "{\"sequence\":");
    buffer_append_u64(&keys->followed, keys->sequence + 1);
    buffer_append_str(&keys->followed, ",\"key\":");
    encode_entry(&keys->followed, r,
                 i < keys->count
                     ? __atomic_load_n(&keys->entries[i].last_used_unix_ms, __ATOMIC_RELAXED)
                     : 0);
    buffer_append_str(&keys->followed, "}\n");
    keys->followed_lines++;
    keys->sequence++;
    pthread_rwlock_wrlock(&keys->lock);
    struct keys_record *old = install(keys, i, r);
    keys->entries[i].store_revision = revision;
    pthread_rwlock_unlock(&keys->lock);
    keys_record_release(old);
}

int keys_follow(struct keys *keys, const struct keys_draft *draft, int64_t revision, char *error,
                size_t error_size)
{
    pthread_mutex_lock(&keys->writer);
    uint32_t i = index_of(keys, draft->id);
    int result = 0;
    if (i != UINT32_MAX && keys->entries[i].store_revision >= revision)
        goto done; /* this change or a later one is in force */
    if (i == UINT32_MAX && keys->count == KEYS_COUNT_MAX) {
        snprintf(error, error_size, "more than %d keys", KEYS_COUNT_MAX);
        result = 1;
        goto done;
    }
    if (i == UINT32_MAX)
        i = keys->count;
    if (!digest_free(keys, draft->sha256, i) ||
        (draft->has_previous && !digest_free(keys, draft->previous_sha256, i))) {
        snprintf(error, error_size, "sha256 of another key");
        result = 1;
        goto done;
    }
    struct keys_record *r = keys_record_new(draft);
    if (r == NULL) {
        result = -1;
    } else if (i < keys->count && same_record(keys->entries[i].record, r)) {
        keys->entries[i].store_revision = revision; /* as it is already: no write */
        keys_record_release(r);
    } else {
        follow_install(keys, i, r, revision);
    }
done:
    pthread_mutex_unlock(&keys->writer);
    return result;
}
