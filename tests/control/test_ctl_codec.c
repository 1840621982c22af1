/* The etcd JSON codec (src/control/ctl_codec.c) without a store: base64 to
 * RFC 4648's vectors and its refusals, the exact bodies of each call, and
 * each answer decoder on good, error and hostile answers, with every bound
 * met and passed by one. */
#include <stdlib.h>
#include <string.h>

#include "control/ctl_bounds.h"
#include "control/ctl_codec.h"
#include "control/ctl_etcd.h"
#include "test.h"

/* The body a builder wrote, as a NUL-terminated string (static storage). */
static const char *text_of(struct buffer *b)
{
    static char out[4096];
    size_t n = b->length < sizeof out - 1 ? b->length : sizeof out - 1;
    memcpy(out, b->data, n);
    out[n] = '\0';
    buffer_free(b);
    return out;
}

static char *base64_of(const char *bytes, size_t length)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    ctl_base64_append(&b, bytes, length);
    buffer_append_char(&b, '\0');
    return buffer_detach(&b);
}

static void base64_vectors(void)
{
    static const char *vectors[][2] = {{"", ""},
                                       {"f", "Zg=="},
                                       {"fo", "Zm8="},
                                       {"foo", "Zm9v"},
                                       {"foob", "Zm9vYg=="},
                                       {"fooba", "Zm9vYmE="},
                                       {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        char *encoded = base64_of(vectors[i][0], strlen(vectors[i][0]));
        CHECK_STR(encoded, vectors[i][1]);
        free(encoded);
        char out[16];
        size_t length = 99;
        CHECK(ctl_base64_decode(vectors[i][1], strlen(vectors[i][1]), out, sizeof out, &length) ==
              0);
        CHECK_EQ_U64(length, strlen(vectors[i][0]));
        CHECK_STR(out, vectors[i][0]);
    }
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    char *encoded = base64_of(all, sizeof all);
    char back[257];
    size_t length = 0;
    CHECK(ctl_base64_decode(encoded, strlen(encoded), back, sizeof back, &length) == 0);
    CHECK_EQ_U64(length, 256);
    CHECK(memcmp(back, all, 256) == 0);
    free(encoded);
}

static void base64_refusals(void)
{
    static const char *bad[] = {
        "Zg=", "Z===", "Zh==", "Zm9=", "Zm9v!A==", "=AAA", "Zg==Zg==", "Zm 9v", "Zm9v\n", "A"};
    char out[64];
    size_t length;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(ctl_base64_decode(bad[i], strlen(bad[i]), out, sizeof out, &length) == -1);
    /* "foobar" needs 6 bytes and the NUL: 7 fits, 6 does not. */
    CHECK(ctl_base64_decode("Zm9vYmFy", 8, out, 7, &length) == 0);
    CHECK(ctl_base64_decode("Zm9vYmFy", 8, out, 6, &length) == -1);
}

static void prefix_ends(void)
{
    char out[8];
    size_t length = 0;
    CHECK(ctl_prefix_end("/a/", 3, out, sizeof out, &length) == 0);
    CHECK_EQ_U64(length, 3);
    CHECK(memcmp(out, "/a0", 3) == 0);
    CHECK(ctl_prefix_end("a\xff", 2, out, sizeof out, &length) == 0);
    CHECK_EQ_U64(length, 1);
    CHECK(out[0] == 'b');
    CHECK(ctl_prefix_end("\xff\xff", 2, out, sizeof out, &length) == -1);
    CHECK(ctl_prefix_end("", 0, out, sizeof out, &length) == -1);
    CHECK(ctl_prefix_end("abcdefghi", 9, out, sizeof out, &length) == -1);
}

static void request_bodies(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    ctl_encode_put(&b, "k", 1, "v1", 2);
    CHECK_STR(text_of(&b), "{\"key\":\"aw==\",\"value\":\"djE=\"}");
    buffer_init(&b, NULL, 0);
    ctl_encode_range(&b, "/a/", 3, "/a0", 3, 256, 7);
    CHECK_STR(text_of(&b),
              "{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\",\"limit\":\"256\",\"revision\":\"7\"}");
    buffer_init(&b, NULL, 0);
    ctl_encode_range(&b, "k", 1, NULL, 0, 0, 0);
    CHECK_STR(text_of(&b), "{\"key\":\"aw==\"}");
    buffer_init(&b, NULL, 0);
    ctl_encode_delete(&b, "k", 1);
    CHECK_STR(text_of(&b), "{\"key\":\"aw==\"}");
    buffer_init(&b, NULL, 0);
    ctl_encode_put_if(&b, "k", 1, "v", 1, 0);
    CHECK_STR(text_of(&b), "{\"compare\":[{\"target\":\"MOD\",\"result\":\"EQUAL\",\"key\":"
                           "\"aw==\",\"mod_revision\":\"0\"}],\"success\":[{\"request_put\":"
                           "{\"key\":\"aw==\",\"value\":\"dg==\"}}]}");
    buffer_init(&b, NULL, 0);
    ctl_encode_watch(&b, "/a/", 3, "/a0", 3, 12);
    CHECK_STR(text_of(&b), "{\"create_request\":{\"key\":\"L2Ev\",\"range_end\":\"L2Ew\","
                           "\"start_revision\":\"12\"}}");
}

/* Decoders parse in place: each gets its own copy. */
static int put_of(const char *answer, int64_t *revision, char *error)
{
    char *copy = strdup(answer);
    int result = ctl_decode_put(copy, strlen(copy), revision, error, 256);
    free(copy);
    return result;
}

static void unary_answers(void)
{
    char error[256];
    int64_t revision = 0, deleted = 0;
    CHECK(put_of("{\"header\":{\"cluster_id\":\"1\",\"revision\":\"42\"}}", &revision, error) == 0);
    CHECK_EQ_I64(revision, 42);
    CHECK(put_of("{\"header\":{\"revision\":43}}", &revision, error) == 0);
    CHECK_EQ_I64(revision, 43);
    CHECK(put_of("{\"error\":\"etcdserver: no leader\",\"code\":14,\"message\":\"etcdserver: no "
                 "leader\"}",
                 &revision, error) == -1);
    CHECK_STR(error, "etcd: etcdserver: no leader");
    CHECK(put_of("{\"header\":{}}", &revision, error) == -1);
    CHECK(put_of("{\"header\":{\"revision\":\"4x\"}}", &revision, error) == -1);
    CHECK(put_of("{\"header\":{\"revision\":\"-4\"}}", &revision, error) == -1);
    CHECK(put_of("{\"header\":{\"revision\":\"9999999999999999999\"}}", &revision, error) == -1);
    CHECK(put_of("[]", &revision, error) == -1);
    CHECK(put_of("{\"header\":", &revision, error) == -1);
    char text[] = "{\"header\":{\"revision\":\"5\"},\"deleted\":\"1\"}";
    CHECK(ctl_decode_delete(text, strlen(text), &revision, &deleted, error, sizeof error) == 0);
    CHECK_EQ_I64(deleted, 1);
    bool succeeded = true;
    char txn[] = "{\"header\":{\"revision\":\"5\"}}";
    CHECK(ctl_decode_txn(txn, strlen(txn), &revision, &succeeded, error, sizeof error) == 0);
    CHECK(!succeeded);
    char txn2[] = "{\"header\":{\"revision\":\"6\"},\"succeeded\":true}";
    CHECK(ctl_decode_txn(txn2, strlen(txn2), &revision, &succeeded, error, sizeof error) == 0);
    CHECK(succeeded);
}

/* A range answer with count kvs whose keys have key_bytes and values
 * value_bytes bytes. */
static char *range_answer(size_t count, size_t key_bytes, size_t value_bytes)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "{\"header\":{\"revision\":\"9\"},\"more\":true,\"kvs\":[");
    char *key = malloc(key_bytes + 1), *value = malloc(value_bytes + 1);
    memset(key, 'k', key_bytes);
    memset(value, 'v', value_bytes);
    for (size_t i = 0; i < count; i++) {
        buffer_append_str(&b, i > 0 ? ",{\"key\":\"" : "{\"key\":\"");
        ctl_base64_append(&b, key, key_bytes);
        buffer_append_str(&b, "\",\"mod_revision\":\"3\",\"value\":\"");
        ctl_base64_append(&b, value, value_bytes);
        buffer_append_str(&b, "\"}");
    }
    buffer_append_str(&b, "]}");
    buffer_append_char(&b, '\0');
    free(key);
    free(value);
    return buffer_detach(&b);
}

static int range_of(char *text, struct ctl_range_page *page)
{
    char error[256];
    int result = ctl_decode_range(text, strlen(text), page, error, sizeof error);
    free(text);
    return result;
}

static void range_answers(void)
{
    struct ctl_range_page page;
    REQUIRE(range_of(range_answer(2, 3, 4), &page) == 0);
    CHECK_EQ_I64(page.revision, 9);
    CHECK(page.more);
    CHECK_EQ_U64(page.count, 2);
    CHECK_STR(page.kvs[1].key, "kkk");
    CHECK_STR(page.kvs[1].value, "vvvv");
    CHECK_EQ_I64(page.kvs[0].mod_revision, 3);
    ctl_range_page_free(&page);
    CHECK(range_of(range_answer(1, CTL_KEY_BYTES_MAX, CTL_VALUE_BYTES_MAX), &page) == 0);
    ctl_range_page_free(&page);
    CHECK(range_of(range_answer(1, CTL_KEY_BYTES_MAX + 1, 1), &page) == -1);
    CHECK(range_of(range_answer(1, 1, CTL_VALUE_BYTES_MAX + 1), &page) == -1);
    CHECK(range_of(range_answer(CTL_RANGE_PAGE_KEYS, 1, 1), &page) == 0);
    ctl_range_page_free(&page);
    CHECK(range_of(range_answer(CTL_RANGE_PAGE_KEYS + 1, 1, 1), &page) == -1);
    CHECK(range_of(strdup("{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"a!==\"}]}"),
                   &page) == -1);
    CHECK(range_of(strdup("{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":\"\"}]}"), &page) ==
          -1);
    CHECK(range_of(strdup("{\"header\":{\"revision\":\"9\"},\"kvs\":{}}"), &page) == -1);
    CHECK(range_of(strdup("{\"header\":{\"revision\":\"9\"}}"), &page) == 0);
    CHECK_EQ_U64(page.count, 0);
    ctl_range_page_free(&page);
}

static int watch_of(const char *answer, struct ctl_watch_response *response)
{
    char *copy = strdup(answer);
    char error[256];
    int result = ctl_decode_watch(copy, strlen(copy), response, error, sizeof error);
    free(copy);
    return result;
}

static void watch_answers(void)
{
    struct ctl_watch_response r;
    REQUIRE(watch_of("{\"result\":{\"header\":{\"revision\":\"5\"},\"created\":true}}", &r) == 0);
    CHECK(r.created);
    CHECK_EQ_U64(r.count, 0);
    ctl_watch_response_free(&r);
    REQUIRE(watch_of("{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[{\"kv\":{\"key\":"
                     "\"YQ==\",\"value\":\"Yg==\",\"mod_revision\":\"6\"}},{\"type\":\"DELETE\","
                     "\"kv\":{\"key\":\"Yw==\",\"mod_revision\":\"7\"}}]}}",
                     &r) == 0);
    REQUIRE(r.count == 2);
    CHECK(r.events[0].type == CTL_EVENT_PUT);
    CHECK_STR(r.events[0].kv.value, "b");
    CHECK(r.events[1].type == CTL_EVENT_DELETE);
    CHECK_STR(r.events[1].kv.key, "c");
    CHECK_EQ_I64(r.events[1].kv.mod_revision, 7);
    ctl_watch_response_free(&r);
    REQUIRE(watch_of("{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
                     "\"compact_revision\":\"8\"}}",
                     &r) == 0);
    CHECK(r.canceled);
    CHECK_EQ_I64(r.compact_revision, 8);
    ctl_watch_response_free(&r);
    CHECK(watch_of("{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[{\"type\":\"MOVE\","
                   "\"kv\":{\"key\":\"YQ==\"}}]}}",
                   &r) == -1);
    CHECK(watch_of("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}", &r) == -1);
    CHECK(watch_of("{\"result\":{}}", &r) == -1);
    CHECK(watch_of("{\"result\":", &r) == -1);
    CHECK(watch_of("{}", &r) == -1);
}

/* CTL_WATCH_EVENTS_MAX events decode; one more is refused. */
static void watch_events_bound(void)
{
    for (size_t extra = 0; extra < 2; extra++) {
        struct buffer b;
        buffer_init(&b, NULL, 0);
        buffer_append_str(&b, "{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[");
        for (size_t i = 0; i < CTL_WATCH_EVENTS_MAX + extra; i++)
            buffer_append_str(&b, i > 0 ? ",{\"kv\":{\"key\":\"YQ==\"}}"
                                        : "{\"kv\":{\"key\":\"YQ==\"}}");
        buffer_append_str(&b, "]}}");
        struct ctl_watch_response r;
        char error[256];
        int result = ctl_decode_watch(b.data, b.length, &r, error, sizeof error);
        CHECK(result == (extra == 0 ? 0 : -1));
        if (result == 0)
            ctl_watch_response_free(&r);
        buffer_free(&b);
    }
}

/* --control's URL: members up to CTL_ENDPOINTS_MAX, each host:port. */
static void control_urls(void)
{
    struct ctl_etcd *etcd = NULL;
    char error[256];
    CHECK(ctl_etcd_open("etcd://127.0.0.1:2379", &etcd, error, sizeof error) == 0);
    ctl_etcd_close(etcd);
    CHECK(ctl_etcd_open("etcd://a:1,[::1]:2,b.example:3", &etcd, error, sizeof error) == 0);
    ctl_etcd_close(etcd);
    static const char *bad[] = {
        "http://a:1",  "etcd://",    "etcd://a",     "etcd://a:",    "etcd://:1",
        "etcd://a:1,", "etcd://a:x", "etcd://a b:1", "etcd://a/b:1", "etcd://u@a:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(ctl_etcd_open(bad[i], &etcd, error, sizeof error) == -1);
        CHECK(etcd == NULL);
    }
    char url[CTL_ENDPOINTS_MAX * 8 + 16] = "etcd://";
    for (int i = 0; i < CTL_ENDPOINTS_MAX; i++)
        strcat(url, i > 0 ? ",h:1" : "h:1");
    CHECK(ctl_etcd_open(url, &etcd, error, sizeof error) == 0);
    ctl_etcd_close(etcd);
    strcat(url, ",h:1");
    CHECK(ctl_etcd_open(url, &etcd, error, sizeof error) == -1);
    char host[CTL_ENDPOINT_LENGTH_MAX + 16] = "etcd://";
    memset(host + 7, 'h', CTL_ENDPOINT_LENGTH_MAX - 2);
    strcpy(host + 7 + CTL_ENDPOINT_LENGTH_MAX - 2, ":1");
    CHECK(ctl_etcd_open(host, &etcd, error, sizeof error) == 0);
    ctl_etcd_close(etcd);
    host[7] = 'x';
    memmove(host + 8, host + 7, strlen(host + 7) + 1); /* one byte longer */
    CHECK(ctl_etcd_open(host, &etcd, error, sizeof error) == -1);
}

int main(void)
{
    RUN(base64_vectors, "base64 matches RFC 4648's vectors and round-trips every byte");
    RUN(base64_refusals, "bad base64 (length, alphabet, padding, stray bits, room) is refused");
    RUN(prefix_ends, "a prefix's range end increments its last byte below 0xff");
    RUN(request_bodies, "each call's body is etcd's JSON with base64 keys and string int64s");
    RUN(unary_answers, "put, delete and txn answers decode; error and malformed ones are refused");
    RUN(range_answers, "range pages decode, up to each bound and not one past it");
    RUN(watch_answers, "watch lines decode created, put, delete and canceled; bad ones refused");
    RUN(watch_events_bound, "a watch line of CTL_WATCH_EVENTS_MAX events decodes, one more not");
    RUN(control_urls, "--control takes etcd://host:port,... up to each bound, nothing else");
    return test_summary();
}
