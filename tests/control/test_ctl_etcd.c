/* The etcd client and the control plane's follower (src/control) against a
 * real 3-member cluster that test_ctl_etcd.py starts: put, paged prefix
 * range, create-once and compare-and-set, delete, a watch that sees a
 * change, the follower applying another writer's change and its own once,
 * and all of it still working with the first member killed.
 * Usage: test_ctl_etcd etcd://a,b,c PID_OF_FIRST_MEMBER */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/ctl_bounds.h"
#include "control/ctl_codec.h"
#include "control/ctl_etcd.h"
#include "control/ctl_plane.h"
#include "test.h"

static const char *url;
static pid_t first_member;
static struct ctl_etcd *etcd;
static char prefix[64]; /* this run's: a run never sees another's keys */

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int put_text(const char *key, const char *value, int64_t *revision)
{
    char error[256];
    int result =
        ctl_etcd_put(etcd, key, strlen(key), value, strlen(value), revision, error, sizeof error);
    if (result != 0)
        fprintf(stderr, "  put %s: %s\n", key, error);
    return result;
}

static void put_and_range(void)
{
    char key[128], error[256];
    int64_t r1 = 0, r2 = 0;
    snprintf(key, sizeof key, "%sa/one", prefix);
    REQUIRE(put_text(key, "1", &r1) == 0);
    snprintf(key, sizeof key, "%sa/two", prefix);
    REQUIRE(put_text(key, "2", &r2) == 0);
    CHECK(r2 > r1);
    char under[128];
    snprintf(under, sizeof under, "%sa/", prefix);
    struct ctl_range range;
    REQUIRE(ctl_etcd_range_prefix(etcd, under, &range, error, sizeof error) == 0);
    CHECK(range.revision >= r2);
    REQUIRE(range.count == 2);
    CHECK_STR(range.kvs[0].value, "1");
    CHECK_STR(range.kvs[1].value, "2");
    CHECK_EQ_I64(range.kvs[1].mod_revision, r2);
    ctl_range_free(&range);
}

static size_t discard(char *data, size_t size, size_t count, void *context)
{
    (void)data, (void)context;
    return size * count;
}

/* Puts under/00000 .. under/<count - 1>, each value value_length bytes of
 * 'v', through txns of 128 puts (etcd's --max-txn-ops) on the first member:
 * many keys without a round trip each. 0, or -1. */
static int put_many(const char *under, size_t count, size_t value_length)
{
    char member[256];
    const char *start = url + strlen("etcd://");
    size_t n = strcspn(start, ",");
    if (n >= sizeof member)
        return -1;
    memcpy(member, start, n);
    member[n] = '\0';
    char address[300];
    snprintf(address, sizeof address, "http://%s/v3/kv/txn", member);
    char *value = malloc(value_length + 1);
    if (value == NULL)
        return -1;
    memset(value, 'v', value_length);
    int result = 0;
    for (size_t first = 0; first < count && result == 0; first += 128) {
        struct buffer body;
        buffer_init(&body, NULL, 0);
        buffer_append_str(&body, "{\"success\":[");
        for (size_t i = first; i < count && i < first + 128; i++) {
            char key[256];
            int key_length = snprintf(key, sizeof key, "%s%05zu", under, i);
            buffer_append_str(&body, i > first ? ",{\"request_put\":{\"key\":\""
                                               : "{\"request_put\":{\"key\":\"");
            ctl_base64_append(&body, key, (size_t)key_length);
            buffer_append_str(&body, "\",\"value\":\"");
            ctl_base64_append(&body, value, value_length);
            buffer_append_str(&body, "\"}}");
        }
        buffer_append_str(&body, "]}");
        CURL *easy = body.failed ? NULL : curl_easy_init();
        if (easy == NULL) {
            buffer_free(&body);
            result = -1;
            break;
        }
        curl_easy_setopt(easy, CURLOPT_URL, address);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body.length);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_PROXY, "");
        long status = 0;
        if (curl_easy_perform(easy) != CURLE_OK ||
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200) {
            fprintf(stderr, "  txn of puts under %s: failed (status %ld)\n", under, status);
            result = -1;
        }
        curl_easy_cleanup(easy);
        buffer_free(&body);
    }
    free(value);
    return result;
}

/* Reads under whole: count keys, each once, in order, each value
 * value_length bytes. */
static void check_range(const char *under, size_t count, size_t value_length)
{
    char key[256], error[256];
    struct ctl_range range;
    int read = ctl_etcd_range_prefix(etcd, under, &range, error, sizeof error);
    if (read != 0)
        fprintf(stderr, "  range %s: %s\n", under, error);
    REQUIRE(read == 0);
    CHECK_EQ_U64(range.count, count);
    for (size_t i = 0; i < range.count; i++) {
        snprintf(key, sizeof key, "%s%05zu", under, i);
        CHECK_STR(range.kvs[i].key, key);
        CHECK_EQ_U64(range.kvs[i].value_length, value_length);
    }
    ctl_range_free(&range);
}

/* More keys than a page holds: every one comes back once, in order. */
static void range_pages(void)
{
    char under[128];
    snprintf(under, sizeof under, "%spages/", prefix);
    REQUIRE(put_many(under, CTL_RANGE_PAGE_KEYS * 2 + 3, 1) == 0);
    check_range(under, CTL_RANGE_PAGE_KEYS * 2 + 3, 1);
}

/* Values so large that a page of CTL_RANGE_PAGE_KEYS would pass
 * CTL_RESPONSE_BYTES_MAX: the range still comes whole, in pages sized by
 * their bytes (the halving of a page past the bound: test_ctl_hostile.c). */
static void range_large_values(void)
{
    char under[128];
    snprintf(under, sizeof under, "%slarge/", prefix);
    size_t value_length = CTL_RESPONSE_BYTES_MAX / CTL_RANGE_PAGE_KEYS; /* base64: 4/3 of it */
    REQUIRE(put_many(under, CTL_RANGE_PAGE_KEYS + 5, value_length) == 0);
    check_range(under, CTL_RANGE_PAGE_KEYS + 5, value_length);
}

static void create_once_and_cas(void)
{
    static int run;
    char key[128], error[256];
    snprintf(key, sizeof key, "%sonce%d", prefix, run++);
    bool succeeded = false;
    int64_t created = 0, revision = 0;
    REQUIRE(ctl_etcd_put_if(etcd, key, strlen(key), "a", 1, 0, &succeeded, &created, error,
                            sizeof error) == 0);
    CHECK(succeeded);
    REQUIRE(ctl_etcd_put_if(etcd, key, strlen(key), "b", 1, 0, &succeeded, &revision, error,
                            sizeof error) == 0);
    CHECK(!succeeded); /* it exists: the create-once does nothing */
    REQUIRE(ctl_etcd_put_if(etcd, key, strlen(key), "c", 1, created - 1, &succeeded, &revision,
                            error, sizeof error) == 0);
    CHECK(!succeeded); /* a stale revision */
    REQUIRE(ctl_etcd_put_if(etcd, key, strlen(key), "d", 1, created, &succeeded, &revision, error,
                            sizeof error) == 0);
    CHECK(succeeded);
    struct ctl_range range;
    REQUIRE(ctl_etcd_range_prefix(etcd, key, &range, error, sizeof error) == 0);
    REQUIRE(range.count == 1);
    CHECK_STR(range.kvs[0].value, "d");
    ctl_range_free(&range);
}

static void delete_key(void)
{
    char key[128], error[256];
    snprintf(key, sizeof key, "%sgone", prefix);
    int64_t revision = 0, deleted = 0;
    REQUIRE(put_text(key, "x", &revision) == 0);
    REQUIRE(ctl_etcd_delete(etcd, key, strlen(key), &revision, &deleted, error, sizeof error) == 0);
    CHECK_EQ_I64(deleted, 1);
    REQUIRE(ctl_etcd_delete(etcd, key, strlen(key), &revision, &deleted, error, sizeof error) == 0);
    CHECK_EQ_I64(deleted, 0);
    struct ctl_range range;
    REQUIRE(ctl_etcd_range_prefix(etcd, key, &range, error, sizeof error) == 0);
    CHECK_EQ_U64(range.count, 0);
    ctl_range_free(&range);
}

static void bounds_refused(void)
{
    char error[256];
    static char big[CTL_VALUE_BYTES_MAX + 2];
    memset(big, 'v', sizeof big);
    int64_t revision;
    char key[128];
    snprintf(key, sizeof key, "%sbig", prefix);
    CHECK(ctl_etcd_put(etcd, key, strlen(key), big, CTL_VALUE_BYTES_MAX, &revision, error,
                       sizeof error) == 0);
    CHECK(ctl_etcd_put(etcd, key, strlen(key), big, CTL_VALUE_BYTES_MAX + 1, &revision, error,
                       sizeof error) == -1);
    CHECK(ctl_etcd_put(etcd, big, CTL_KEY_BYTES_MAX + 1, "v", 1, &revision, error, sizeof error) ==
          -1);
}

struct seen {
    char key[128];
    int64_t revision;
    bool deleted;
    int stop;
    int result;
    char error[256];
};

static int record(void *context, const struct ctl_watch_response *response)
{
    struct seen *s = context;
    for (size_t i = 0; i < response->count; i++) {
        snprintf(s->key, sizeof s->key, "%s", response->events[i].kv.key);
        s->revision = response->events[i].kv.mod_revision;
        s->deleted = response->events[i].type == CTL_EVENT_DELETE;
        return 1;
    }
    return 0;
}

static int64_t watch_from;

static void *watch_thread(void *context)
{
    struct seen *s = context;
    bool compacted;
    s->result = ctl_etcd_watch(etcd, prefix, watch_from, record, s, &s->stop, &compacted, s->error,
                               sizeof s->error);
    return NULL;
}

static void watch_sees_change(void)
{
    char key[128];
    snprintf(key, sizeof key, "%swatched", prefix);
    int64_t before = 0, revision = 0;
    REQUIRE(put_text(key, "0", &before) == 0);
    watch_from = before + 1;
    struct seen s = {.result = 99};
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, watch_thread, &s) == 0);
    sleep_ms(200);
    REQUIRE(put_text(key, "1", &revision) == 0);
    pthread_join(thread, NULL);
    CHECK_EQ_I64(s.result, 0);
    CHECK_STR(s.key, key);
    CHECK_EQ_I64(s.revision, revision);
    CHECK(!s.deleted);
    /* Nothing to see: *stop ends the watch. */
    struct seen idle = {.result = 99};
    watch_from = revision + 1000000;
    REQUIRE(pthread_create(&thread, NULL, watch_thread, &idle) == 0);
    sleep_ms(300);
    __atomic_store_n(&idle.stop, 1, __ATOMIC_RELAXED);
    pthread_join(thread, NULL);
    CHECK_EQ_I64(idle.result, 0);
    CHECK(idle.key[0] == '\0');
}

/* ---- the follower, over an in-memory local side -------------------------- */

#define LOCAL_MAX 16
struct local {
    char names[LOCAL_MAX][64];
    char values[LOCAL_MAX][64];
    int puts;
    int removes;
    size_t count;
};

static struct local local;
static pthread_mutex_t local_mutex = PTHREAD_MUTEX_INITIALIZER;

static int local_find(const char *name)
{
    for (size_t i = 0; i < local.count; i++)
        if (strcmp(local.names[i], name) == 0)
            return (int)i;
    return -1;
}

static int local_put(void *context, const char *name, const char *value, size_t length,
                     int64_t revision)
{
    (void)context;
    (void)revision;
    pthread_mutex_lock(&local_mutex);
    int at = local_find(name);
    if (at < 0 && local.count < LOCAL_MAX)
        at = (int)local.count++;
    if (at >= 0) {
        snprintf(local.names[at], sizeof local.names[at], "%s", name);
        snprintf(local.values[at], sizeof local.values[at], "%.*s", (int)length, value);
    }
    local.puts++;
    pthread_mutex_unlock(&local_mutex);
    return 0;
}

static int local_remove(void *context, const char *name)
{
    (void)context;
    pthread_mutex_lock(&local_mutex);
    int at = local_find(name);
    if (at >= 0) {
        local.count--;
        memmove(local.names[at], local.names[local.count], sizeof local.names[at]);
        memmove(local.values[at], local.values[local.count], sizeof local.values[at]);
    }
    local.removes++;
    pthread_mutex_unlock(&local_mutex);
    return 0;
}

static int local_names(void *context, char ***names, size_t *count)
{
    (void)context;
    pthread_mutex_lock(&local_mutex);
    *names = calloc(local.count + 1, sizeof **names);
    for (size_t i = 0; i < local.count; i++)
        (*names)[i] = strdup(local.names[i]);
    *count = local.count;
    pthread_mutex_unlock(&local_mutex);
    return 0;
}

static const char *local_value(const char *name)
{
    static char value[64];
    pthread_mutex_lock(&local_mutex);
    int at = local_find(name);
    snprintf(value, sizeof value, "%s", at >= 0 ? local.values[at] : "(none)");
    pthread_mutex_unlock(&local_mutex);
    return value;
}

/* Polls for up to 2 s (the spec's bound on a change reaching a front end). */
static bool becomes(const char *name, const char *value)
{
    for (int i = 0; i < 200; i++) {
        if (strcmp(local_value(name), value) == 0)
            return true;
        sleep_ms(10);
    }
    return false;
}

static int applied_write(void *context)
{
    int *count = context;
    (*count)++;
    return 0;
}

static void follower(void)
{
    static int run;
    char plane_prefix[128], key[160], error[256];
    snprintf(plane_prefix, sizeof plane_prefix, "%splane%d/", prefix, run++);
    pthread_mutex_lock(&local_mutex);
    memset(&local, 0, sizeof local);
    pthread_mutex_unlock(&local_mutex);
    snprintf(key, sizeof key, "%sbefore", plane_prefix);
    int64_t revision;
    REQUIRE(put_text(key, "b0", &revision) == 0);
    local_put(NULL, "stale", "s", 1, 0); /* held locally, not in the store: removed at start */
    int before_puts = local.puts;
    struct ctl_plane_ops ops = {local_put, local_remove, local_names, NULL, NULL};
    struct ctl_plane *plane;
    /* Every other run, the start's read is begun ahead (as a front end
     * does while it loads its files), and a put lands while it is under
     * way: in the read or after it, it arrives either way. */
    bool ahead = run % 2 == 0;
    struct ctl_prefetch *read = NULL;
    if (ahead)
        REQUIRE(ctl_prefetch_begin(url, plane_prefix, &read, error, sizeof error) == 0);
    snprintf(key, sizeof key, "%sduring", plane_prefix);
    REQUIRE(put_text(key, "d0", &revision) == 0);
    REQUIRE(ctl_plane_open(url, plane_prefix, &ops, NULL, &plane, error, sizeof error) == 0);
    REQUIRE(ctl_plane_start(plane, read) == 0);
    CHECK(becomes("during", "d0"));
    CHECK_STR(local_value("before"), "b0");
    CHECK_STR(local_value("stale"), "(none)");
    CHECK(ctl_plane_revision(plane) >= revision);
    /* Another writer's change arrives through the watch. */
    snprintf(key, sizeof key, "%sother", plane_prefix);
    REQUIRE(put_text(key, "o1", &revision) == 0);
    CHECK(becomes("other", "o1"));
    /* Our own write is applied once: by the writer, not again by the watch. */
    int applied = 0;
    bool ran = false;
    REQUIRE(ctl_plane_write(plane, "mine", "m1", 2, applied_write, &applied, &ran, error,
                            sizeof error) == 0);
    CHECK(ran);
    CHECK_EQ_I64(applied, 1);
    snprintf(key, sizeof key, "%smarker", plane_prefix);
    REQUIRE(put_text(key, "k", &revision) == 0);
    CHECK(becomes("marker", "k"));            /* the watch has passed our write by now */
    CHECK_STR(local_value("mine"), "(none)"); /* applied_write, not local_put, ran for it */
    /* A delete through the store is a remove. */
    int removes = local.removes;
    int64_t deleted;
    snprintf(key, sizeof key, "%sother", plane_prefix);
    REQUIRE(ctl_etcd_delete(etcd, key, strlen(key), &revision, &deleted, error, sizeof error) == 0);
    CHECK(becomes("other", "(none)"));
    CHECK(local.removes == removes + 1);
    CHECK(local.puts > before_puts);
    for (int i = 0; i < 100 && !ctl_plane_connected(plane); i++)
        sleep_ms(10);
    CHECK(ctl_plane_connected(plane));
    ctl_plane_close(plane);
}

/* The first member (the one every call tried first) is killed: calls go
 * to the next, and a follower still follows. */
static void one_member_killed(void)
{
    REQUIRE(kill(first_member, SIGKILL) == 0);
    sleep_ms(100);
    put_and_range();
    create_once_and_cas();
    watch_sees_change();
    follower();
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_ctl_etcd etcd://... PID_OF_FIRST_MEMBER\n");
        return 2;
    }
    url = argv[1];
    first_member = (pid_t)atol(argv[2]);
    snprintf(prefix, sizeof prefix, "/test/%ld/", (long)getpid());
    char error[256];
    if (ctl_etcd_open(url, &etcd, error, sizeof error) != 0) {
        fprintf(stderr, "%s\n", error);
        return 2;
    }
    RUN(put_and_range, "puts are read back by a prefix range, with their revisions");
    RUN(range_pages, "a range of more keys than a page returns each once, in key order");
    RUN(range_large_values, "a range whose full page would pass the answer's bound comes whole");
    RUN(create_once_and_cas, "a txn creates once, and sets only at the key's mod_revision");
    RUN(delete_key, "deleterange removes a key once, and a range no longer sees it");
    RUN(bounds_refused, "a value of CTL_VALUE_BYTES_MAX is stored; one byte more is refused");
    RUN(watch_sees_change, "a watch sees a put made after it started; *stop ends an idle one");
    RUN(follower, "the follower loads the prefix, applies others' changes and its own once");
    RUN(one_member_killed, "with the first member killed, every call and the follower still work");
    ctl_etcd_close(etcd);
    return test_summary();
}
