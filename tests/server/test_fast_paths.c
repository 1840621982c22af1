/* The server's fast paths against the general code they stand in for: the
 * one-pass reserve scan against the JSON parser and decoders (on hand-made
 * bodies and on thousands of byte-level mutations of them), the vectorised
 * string scan against a byte-by-byte one, the integer writer against
 * snprintf, and the one-write allowed answer against its expected bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/buffer.h"
#include "wire/decode.h"
#include "wire/encode.h"
#include "util/jdoc.h"
#include "wire/reserve_scan.h"
#include "test.h"

#define TEXT_MAX 4096
#define MUTATIONS_PER_BODY 4000

static uint64_t random_state = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void)
{
    uint64_t x = random_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    random_state = x;
    return x;
}

static _Alignas(16) char arena_storage[1 << 16];

/* The general path's verdict on a single reserve body (parsed in place). */
static int general_one(char *text, size_t length, struct arena *arena,
                       struct reserve_request *request, struct requirement *requirements,
                       struct reserve_wait *wait)
{
    const struct jdoc_value *root;
    char error[DECODE_ERROR_SIZE];
    if (decode_parse(text, length, arena, &root, error, sizeof error) != 0)
        return -1;
    return decode_reserve_wait(root, "", request, requirements, wait, error, sizeof error);
}

static bool same_request(const struct reserve_request *a, const struct reserve_request *b)
{
    if (a->lease_id_length != b->lease_id_length ||
        memcmp(a->lease_id, b->lease_id, a->lease_id_length + 1) != 0 ||
        a->requirement_count != b->requirement_count || (a->caller == NULL) != (b->caller == NULL))
        return false;
    if (a->caller != NULL && (a->caller_length != b->caller_length ||
                              memcmp(a->caller, b->caller, a->caller_length + 1) != 0))
        return false;
    for (uint32_t i = 0; i < a->requirement_count; i++) {
        const struct requirement *x = &a->requirements[i], *y = &b->requirements[i];
        if (x->key_length != y->key_length || memcmp(x->key, y->key, x->key_length + 1) != 0 ||
            x->amount != y->amount)
            return false;
    }
    return true;
}

/* Scan and general path on one body: a scan that accepts must agree with
 * the general path (same values, strings NUL-terminated alike); one that
 * refuses must leave the body as it was.
 * Returns 1 when the scan accepted, 0 when it refused, -1 on a mismatch. */
static int compare_one(const char *body, size_t length)
{
    static char scanned[TEXT_MAX], general[TEXT_MAX];
    memcpy(scanned, body, length);
    memcpy(general, body, length);
    struct reserve_request a, b;
    struct requirement ra[REQUIREMENTS_PER_RESERVE_MAX], rb[REQUIREMENTS_PER_RESERVE_MAX];
    struct arena arena;
    arena_init(&arena, arena_storage, sizeof arena_storage);
    struct reserve_wait wa, wb;
    int scan = reserve_scan_one(scanned, length, &a, ra, &wa);
    int verdict;
    if (scan != 0) {
        verdict = memcmp(scanned, body, length) == 0 ? 0 : -1;
    } else {
        verdict = general_one(general, length, &arena, &b, rb, &wb) == 0 &&
                          same_request(&a, &b) && wa.wait_ms == wb.wait_ms &&
                          wa.priority == wb.priority
                      ? 1
                      : -1;
    }
    arena_free(&arena);
    if (verdict < 0)
        fprintf(stderr, "  mismatch on: %.*s\n", (int)length, body);
    return verdict;
}

/* The general path's verdict on a batch: every item valid, entries within
 * the bound (the batch handler's rule). */
static int general_batch(char *text, size_t length, struct arena *arena,
                         struct reserve_request *requests, struct requirement *requirements,
                         uint32_t *count)
{
    const struct jdoc_value *root, *list;
    char error[DECODE_ERROR_SIZE];
    if (decode_parse(text, length, arena, &root, error, sizeof error) != 0 ||
        decode_batch(root, &list, error, sizeof error) != 0)
        return -1;
    size_t used = 0;
    for (uint32_t i = 0; i < list->count; i++) {
        if (used + REQUIREMENTS_PER_RESERVE_MAX > 512 ||
            decode_reserve(&list->as.items[i], "", &requests[i], requirements + used, error,
                           sizeof error) != 0)
            return -1;
        used += requests[i].requirement_count;
    }
    *count = list->count;
    return used <= BATCH_REQUIREMENTS_MAX ? 0 : -1;
}

static int compare_batch(const char *body, size_t length)
{
    static char scanned[TEXT_MAX], general[TEXT_MAX];
    static struct reserve_request requests[64];
    static struct requirement requirements[512];
    memcpy(scanned, body, length);
    memcpy(general, body, length);
    struct arena arena_a, arena_b;
    arena_init(&arena_a, NULL, 0);
    arena_init(&arena_b, arena_storage, sizeof arena_storage);
    struct reserve_request *scanned_requests;
    uint32_t scanned_count, general_count;
    int verdict;
    if (reserve_scan_batch(scanned, length, &arena_a, &scanned_requests, &scanned_count) != 0) {
        verdict = memcmp(scanned, body, length) == 0 ? 0 : -1;
    } else {
        verdict =
            general_batch(general, length, &arena_b, requests, requirements, &general_count) == 0 &&
                    general_count == scanned_count
                ? 1
                : -1;
        for (uint32_t i = 0; verdict == 1 && i < scanned_count; i++) {
            if (!same_request(&scanned_requests[i], &requests[i]))
                verdict = -1;
        }
    }
    arena_free(&arena_a);
    arena_free(&arena_b);
    if (verdict < 0)
        fprintf(stderr, "  batch mismatch on: %.*s\n", (int)length, body);
    return verdict;
}

static const char *const single_bodies[] = {
    "{\"lease_id\":\"lg1-2-3\",\"requirements\":[{\"key\":\"bench:llm:rpm\",\"amount\":1},"
    "{\"key\":\"bench:llm:tpm\",\"amount\":500},{\"key\":\"bench:team:usd:month\",\"amount\":2500}]"
    "}",
    " { \"requirements\" : [ { \"amount\" : 7 , \"key\" : \"k\" } ] ,\n\t\"lease_id\" : \"x\" ,"
    " \"caller\" : \"svc a\" } \r\n",
    "{\"lease_id\":\"a\",\"caller\":null,\"requirements\":[{\"key\":\"k\",\"amount\":"
    "999999999999999999}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1},{\"key\":\"k\",\"amount\":"
    "2}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1.5}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1e3}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":01}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":0}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":-1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":9223372036854775807}]}",
    "{\"lease_id\":\"a b\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"a/b\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k k\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\\u0041\",\"amount\":1}]}",
    "{\"lease\\u005fid\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"lease_id\":\"b\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"extra\":1}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]} x",
    "{\"lease_id\":\"\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"\",\"amount\":1}]}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"caller\":7}",
    "{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"caller\":\"\"}",
    "{\"lease_id\":\"\xc3\xa9\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":250}",
    "{\"wait_ms\" : 60000 , \"priority\" : 0 ,\"lease_id\":\"w\",\"requirements\":[{\"key\":"
    "\"k\",\"amount\":1}]}",
    "{\"lease_id\":\"w\",\"priority\":9,\"wait_ms\":0,\"requirements\":[{\"key\":\"k\","
    "\"amount\":1}]}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":60001}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":"
    "999999999999999999999}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":01}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":1.0}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":5e1}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":-1}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":\"5\"}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":null}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait_ms\":5,"
    "\"wait_ms\":6}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"priority\":10}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"priority\":7,"
    "\"priority\":7}",
    "{\"lease_id\":\"w\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],\"wait\":5}",
};

static void scan_agrees_with_general_path_on_hand_made_bodies(void)
{
    int accepted = 0;
    for (size_t i = 0; i < sizeof single_bodies / sizeof single_bodies[0]; i++) {
        int verdict = compare_one(single_bodies[i], strlen(single_bodies[i]));
        CHECK(verdict >= 0);
        accepted += verdict > 0;
    }
    /* The plain ones are taken by the scan (it is a fast path, not a no-op),
     * those that wait too. */
    CHECK(accepted >= 7);
    for (size_t i = 0; i < sizeof single_bodies / sizeof single_bodies[0]; i++) {
        if (strstr(single_bodies[i], "60000") != NULL)
            CHECK_EQ_I64(compare_one(single_bodies[i], strlen(single_bodies[i])), 1);
    }
    const char *first = single_bodies[0];
    CHECK_EQ_I64(compare_one(first, strlen(first)), 1);
}

/* Replaces, inserts or deletes one byte, from a set rich in JSON syntax. */
static size_t mutate(const char *body, size_t length, char *out)
{
    static const char alphabet[] = "{}[]:,\" \\0123456789-.eE_akrlq\x01\x7f\xc3";
    size_t at = (size_t)(next_random() % (length + 1));
    char c = alphabet[next_random() % (sizeof alphabet - 1)];
    memcpy(out, body, length);
    switch (next_random() % 3) {
    case 0:
        if (at < length) {
            out[at] = c;
            return length;
        }
        return length;
    case 1:
        memmove(out + at + 1, out + at, length - at);
        out[at] = c;
        return length + 1;
    default:
        if (at < length) {
            memmove(out + at, out + at + 1, length - at - 1);
            return length - 1;
        }
        return length;
    }
}

static void scan_agrees_with_general_path_on_mutations(void)
{
    char mutated[TEXT_MAX];
    int mismatches = 0, accepted = 0, refused = 0;
    for (size_t i = 0; i < sizeof single_bodies / sizeof single_bodies[0]; i++) {
        for (int m = 0; m < MUTATIONS_PER_BODY; m++) {
            size_t length = mutate(single_bodies[i], strlen(single_bodies[i]), mutated);
            int verdict = compare_one(mutated, length);
            mismatches += verdict < 0;
            accepted += verdict > 0;
            refused += verdict == 0;
        }
    }
    CHECK_EQ_I64(mismatches, 0);
    CHECK(accepted > 1000);
    CHECK(refused > 1000);
}

static const char *const batch_bodies[] = {
    "{\"requests\":[{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]},"
    "{\"lease_id\":\"b\",\"requirements\":[{\"key\":\"k\",\"amount\":2},{\"key\":\"j\",\"amount\":"
    "3}]}]}",
    " {\n \"requests\" : [ {\"requirements\":[{\"amount\":4,\"key\":\"x\"}],\"lease_id\":\"c\","
    "\"caller\":\"me\"} ] } ",
    "{\"requests\":[{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]},7]}",
    "{\"requests\":[]}",
    "{\"requests\":[{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}],"
    "\"wait_ms\":5}]}",
    "{\"requests\":[{\"lease_id\":\"a\",\"priority\":1,\"requirements\":[{\"key\":\"k\","
    "\"amount\":1}]}]}",
    "{\"requests\":[{\"lease_id\":\"a\",\"requirements\":[{\"key\":\"k\",\"amount\":1}]}],\"x\":1}",
};

static void batch_scan_agrees_with_general_path(void)
{
    char mutated[TEXT_MAX];
    int mismatches = 0, accepted = 0;
    for (size_t i = 0; i < sizeof batch_bodies / sizeof batch_bodies[0]; i++) {
        int verdict = compare_batch(batch_bodies[i], strlen(batch_bodies[i]));
        mismatches += verdict < 0;
        accepted += verdict > 0;
        for (int m = 0; m < MUTATIONS_PER_BODY; m++) {
            size_t length = mutate(batch_bodies[i], strlen(batch_bodies[i]), mutated);
            verdict = compare_batch(mutated, length);
            mismatches += verdict < 0;
            accepted += verdict > 0;
        }
    }
    CHECK_EQ_I64(mismatches, 0);
    CHECK(accepted > 200); /* so the comparison is not only of refusals */
}

/* A batch one requirement past BATCH_REQUIREMENTS_MAX is left to the
 * general path (which refuses it); one at the bound scans. */
static void batch_scan_leaves_the_bound_to_the_general_path(void)
{
    static char body[(BATCH_REQUIREMENTS_MAX + 1) * 80];
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = 0;
        n += (size_t)sprintf(body + n, "{\"requests\":[");
        int total = BATCH_REQUIREMENTS_MAX + extra;
        for (int i = 0; i < total; i++)
            n += (size_t)sprintf(body + n,
                                 "%s{\"lease_id\":\"l%d\",\"requirements\":[{\"key\":\"k\","
                                 "\"amount\":1}]}",
                                 i > 0 ? "," : "", i);
        n += (size_t)sprintf(body + n, "]}");
        struct arena arena;
        arena_init(&arena, NULL, 0);
        struct reserve_request *requests;
        uint32_t count = 0;
        int scanned = reserve_scan_batch(body, n, &arena, &requests, &count);
        CHECK_EQ_I64(scanned, extra == 0 ? 0 : -1);
        if (extra == 0)
            CHECK_EQ_U64(count, BATCH_REQUIREMENTS_MAX);
        arena_free(&arena);
    }
}

static size_t reference_run(const unsigned char *p, size_t length, unsigned *seen)
{
    size_t n = 0;
    for (; n < length; n++) {
        unsigned c = jdoc_char_class[p[n]];
        if (c & JDOC_SCAN_STOP)
            break;
        *seen &= c;
    }
    return n;
}

static void plain_run_matches_a_byte_by_byte_scan(void)
{
    static const char common[] = "aZ09-._:/ !~\x7f\"\\\x1f\x80\xff";
    unsigned char text[80];
    int mismatches = 0;
    for (int round = 0; round < 200000; round++) {
        size_t length = (size_t)(next_random() % sizeof text);
        for (size_t i = 0; i < length; i++) {
            /* mostly plain bytes, so runs are long */
            uint64_t r = next_random();
            text[i] = r % 8 == 0 ? (unsigned char)common[(r >> 8) % (sizeof common - 1)]
                                 : (unsigned char)(0x21 + (r >> 8) % 0x5e);
        }
        unsigned seen = JDOC_KEY_CHARS | JDOC_LEASE_CHARS, expected_seen = seen;
        size_t run = jdoc_plain_run((const char *)text, (const char *)text + length, &seen);
        size_t expected = reference_run(text, length, &expected_seen);
        mismatches += run != expected || seen != expected_seen;
    }
    CHECK_EQ_I64(mismatches, 0);
}

static void integers_are_written_as_snprintf_writes_them(void)
{
    char mine[32], reference[32];
    int mismatches = 0;
    uint64_t power = 1;
    for (int digits = 0; digits <= 20; digits++) {
        uint64_t values[] = {power, power - 1, power + 1, power * 3 + 7};
        for (size_t i = 0; i < 4; i++) {
            *buffer_put_u64(mine, values[i]) = '\0';
            snprintf(reference, sizeof reference, "%" PRIu64, values[i]);
            mismatches += strcmp(mine, reference) != 0;
            int64_t signed_value = (int64_t)values[i];
            *buffer_put_i64(mine, signed_value) = '\0';
            snprintf(reference, sizeof reference, "%" PRId64, signed_value);
            mismatches += strcmp(mine, reference) != 0;
        }
        power = digits < 19 ? power * 10 : power;
    }
    for (int round = 0; round < 100000; round++) {
        uint64_t value = next_random() >> (next_random() % 64);
        *buffer_put_u64(mine, value) = '\0';
        snprintf(reference, sizeof reference, "%" PRIu64, value);
        mismatches += strcmp(mine, reference) != 0;
    }
    *buffer_put_u64(mine, UINT64_MAX) = '\0';
    CHECK_STR(mine, "18446744073709551615");
    *buffer_put_i64(mine, INT64_MIN) = '\0';
    CHECK_STR(mine, "-9223372036854775808");
    *buffer_put_u64(mine, 0) = '\0';
    CHECK_STR(mine, "0");
    CHECK_EQ_I64(mismatches, 0);
}

static void allowed_answer_has_the_documented_bytes(void)
{
    struct requirement requirement = {"k", 1, 1};
    struct reserve_request request = {.lease_id = "a",
                                      .lease_id_length = 1,
                                      .requirements = &requirement,
                                      .requirement_count = 1};
    struct reserve_result result;
    memset(&result, 0, sizeof result);
    result.allowed = true;
    result.reserved_at_unix_ms = INT64_C(1768478400000);
    result.expires_at_unix_ms = INT64_C(1768478460000);
    char storage[64]; /* too small: the writer moves to the heap */
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    CHECK_EQ_I64(encode_reserve_members(&b, &request, &result), 200);
    buffer_append_char(&b, '\0');
    CHECK_STR(b.data, "\"allowed\":true,\"retry_after_ms\":0,\"reserved_at_unix_ms\":1768478400000,"
                      "\"expires_at_unix_ms\":1768478460000,\"error\":\"\",\"denied_keys\":[]");
    buffer_free(&b);
    result.allowed = false;
    result.retry_after_ms = 1500;
    result.denied_count = 1;
    result.denied_index[0] = 0;
    buffer_init(&b, storage, sizeof storage);
    encode_reserve_members(&b, &request, &result);
    buffer_append_char(&b, '\0');
    CHECK_STR(b.data, "\"allowed\":false,\"retry_after_ms\":1500,\"reserved_at_unix_ms\":0,"
                      "\"expires_at_unix_ms\":0,\"error\":\"\",\"denied_keys\":[\"k\"]");
    buffer_free(&b);
}

int main(void)
{
    RUN(scan_agrees_with_general_path_on_hand_made_bodies,
        "the reserve scan decodes plain bodies as the general path does and leaves the rest to it");
    RUN(scan_agrees_with_general_path_on_mutations,
        "on byte mutations of reserve bodies the scan never accepts what the general path "
        "refuses, never decodes differently, and never changes a body it refuses");
    RUN(batch_scan_agrees_with_general_path,
        "the same for batch bodies: all items scan, or the general path decides");
    RUN(batch_scan_leaves_the_bound_to_the_general_path,
        "a batch at BATCH_REQUIREMENTS_MAX scans; one past it goes to the general path");
    RUN(plain_run_matches_a_byte_by_byte_scan,
        "the 16-byte string scan finds the same end and character classes as a byte loop");
    RUN(integers_are_written_as_snprintf_writes_them,
        "buffer_put_u64/i64 give snprintf's digits at every width and at the extremes");
    RUN(allowed_answer_has_the_documented_bytes,
        "the one-write allowed answer and the general denial answer have the API's bytes");
    return test_summary();
}
