/* The reply buffer (util/buffer.h), above all when it is empty and never
 * allocated: an upstream answer with no body is exactly that, and every
 * function must take it without passing NULL to memcpy or adding to a NULL
 * pointer (undefined behaviour that the sanitizer build stops on). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/buffer.h"

/* An empty buffer's content can be handed to memcpy like any other. */
static void an_empty_buffer_has_content_to_copy(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    CHECK(b.data != NULL);
    CHECK_EQ_U64(b.length, 0);
    char copy[1] = {'x'};
    memcpy(copy, b.data, b.length);
    CHECK(copy[0] == 'x');
    buffer_free(&b);
    CHECK(b.data != NULL); /* and so it is once freed */
    CHECK_EQ_U64(b.length, 0);
}

static void an_empty_buffer_detaches_as_an_empty_block(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    char *data = buffer_detach(&b);
    CHECK(data != NULL); /* NULL would say "out of memory" */
    free(data);
    CHECK(b.data != NULL);
    CHECK_EQ_U64(b.length, 0);
    CHECK_EQ_U64(b.capacity, 0);
    /* Empty caller storage too. */
    char storage[16];
    buffer_init(&b, storage, sizeof storage);
    data = buffer_detach(&b);
    CHECK(data != NULL);
    CHECK(data != storage);
    free(data);
}

/* Content on caller storage is copied off it; content on the heap is
 * handed over as it is. */
static void a_detached_block_holds_the_content(void)
{
    char storage[8];
    struct buffer b;
    buffer_init(&b, storage, sizeof storage);
    buffer_append_str(&b, "abc");
    char *data = buffer_detach(&b);
    REQUIRE(data != NULL);
    CHECK(data != storage);
    CHECK(memcmp(data, "abc", 3) == 0);
    free(data);
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "heap");
    REQUIRE(b.heap);
    char *heap = b.data;
    data = buffer_detach(&b);
    CHECK(data == heap);
    CHECK(memcmp(data, "heap", 4) == 0);
    free(data);
}

/* Nothing appended to an empty buffer: it stays empty and unallocated. */
static void appending_nothing_to_an_empty_buffer_changes_nothing(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append(&b, NULL, 0);
    buffer_append(&b, "", 0);
    buffer_append_str(&b, "");
    buffer_printf(&b, "%s", "");
    CHECK_EQ_U64(b.length, 0);
    CHECK(!b.heap);
    CHECK(!b.failed);
    char *at = buffer_room(&b, 0);
    REQUIRE(at != NULL);
    buffer_wrote(&b, at);
    CHECK_EQ_U64(b.length, 0);
    buffer_free(&b);
}

static void an_empty_json_string_is_two_quotes(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_json_string(&b, NULL, 0);
    buffer_append_json_string(&b, "", 0);
    REQUIRE(b.length == 4);
    CHECK(memcmp(b.data, "\"\"\"\"", 4) == 0);
    buffer_free(&b);
}

/* Once freed or detached a buffer is empty and takes content again. */
static void a_freed_or_detached_buffer_is_usable_again(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    buffer_append_str(&b, "one");
    free(buffer_detach(&b));
    buffer_append_str(&b, "two");
    REQUIRE(b.length == 3);
    CHECK(memcmp(b.data, "two", 3) == 0);
    buffer_free(&b);
    buffer_append_u64(&b, 42);
    REQUIRE(b.length == 2);
    CHECK(memcmp(b.data, "42", 2) == 0);
    buffer_free(&b);
}

/* Growth stops at capacity_max: the content is marked incomplete and stays
 * within the bound. */
static void growth_stops_at_the_bound(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    b.capacity_max = 300;
    char block[200];
    memset(block, 'a', sizeof block);
    buffer_append(&b, block, sizeof block);
    CHECK(!b.failed);
    buffer_append(&b, block, sizeof block);
    CHECK(b.failed);
    CHECK_EQ_U64(b.length, 200);
    CHECK(b.capacity <= 300);
    buffer_free(&b);
}

/* A cap below the least block (256 bytes) is a block of exactly the cap. */
static void a_cap_below_the_least_block_is_the_block(void)
{
    struct buffer b;
    buffer_init(&b, NULL, 0);
    b.capacity_max = 100;
    CHECK(buffer_grow(&b, 100));
    CHECK_EQ_U64(b.capacity, 100);
    buffer_append(&b, "x", 1);
    CHECK(!b.failed);
    buffer_free(&b);
}

int main(void)
{
    RUN(an_empty_buffer_has_content_to_copy,
        "an empty, never-allocated buffer points at content (never NULL)");
    RUN(an_empty_buffer_detaches_as_an_empty_block,
        "an empty buffer detaches as an empty malloc'd block, not NULL");
    RUN(a_detached_block_holds_the_content,
        "detach copies content off caller storage and hands heap content over");
    RUN(appending_nothing_to_an_empty_buffer_changes_nothing,
        "appending nothing to an empty buffer leaves it empty and unallocated");
    RUN(an_empty_json_string_is_two_quotes, "an empty JSON string, NULL or not, is \"\"");
    RUN(a_freed_or_detached_buffer_is_usable_again,
        "a freed or detached buffer takes content again");
    RUN(growth_stops_at_the_bound, "growth stops at capacity_max with failed set");
    RUN(a_cap_below_the_least_block_is_the_block,
        "a cap below the least block gives a block of exactly the cap");
    return test_summary();
}
