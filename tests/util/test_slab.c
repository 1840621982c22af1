/* The slab pool (util/slab.h): blocks of the right size, aligned, apart from
 * each other, reused once given back and only in their own class. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "test.h"
#include "util/slab.h"

static const uint32_t classes[] = {64, 192, 1024};
#define SLAB_BYTES 4096 /* room for a few blocks per slab: slabs run out */

static void a_block_gets_the_smallest_class_that_holds_it(void)
{
    struct slab_pool pool;
    slab_pool_init(&pool, classes, 3, SLAB_BYTES);
    CHECK_EQ_U64(slab_pool_class(&pool, 1), 0);
    CHECK_EQ_U64(slab_pool_class(&pool, 64), 0);
    CHECK_EQ_U64(slab_pool_class(&pool, 65), 1);
    CHECK_EQ_U64(slab_pool_class(&pool, 192), 1);
    CHECK_EQ_U64(slab_pool_class(&pool, 193), 2);
    CHECK_EQ_U64(slab_pool_class(&pool, 1024), 2);
    slab_pool_free(&pool);
}

/* Blocks of several classes over several slabs: each is aligned, and
 * filling every one with its own byte leaves every other intact. */
static void blocks_are_aligned_and_never_overlap(void)
{
    struct slab_pool pool;
    slab_pool_init(&pool, classes, 3, SLAB_BYTES);
    enum { COUNT = 60 };
    unsigned char *blocks[COUNT];
    uint32_t sizes[COUNT];
    for (int i = 0; i < COUNT; i++) {
        uint32_t c = (uint32_t)(i % 3);
        blocks[i] = slab_pool_take(&pool, c);
        REQUIRE(blocks[i] != NULL);
        sizes[i] = classes[c];
        CHECK((uintptr_t)blocks[i] % SLAB_ALIGN == 0);
        memset(blocks[i], i + 1, sizes[i]);
    }
    for (int i = 0; i < COUNT; i++) {
        bool intact = true;
        for (uint32_t k = 0; k < sizes[i]; k++)
            intact = intact && blocks[i][k] == (unsigned char)(i + 1);
        CHECK(intact);
    }
    slab_pool_free(&pool);
}

static void a_block_given_back_is_taken_again_in_its_class_only(void)
{
    struct slab_pool pool;
    slab_pool_init(&pool, classes, 3, SLAB_BYTES);
    void *small = slab_pool_take(&pool, 0);
    void *middle = slab_pool_take(&pool, 1);
    REQUIRE(small != NULL && middle != NULL);
    slab_pool_give(&pool, small, 0);
    void *other = slab_pool_take(&pool, 1);
    CHECK(other != small); /* another class: never the small block */
    CHECK(other != middle);
    CHECK(slab_pool_take(&pool, 0) == small);
    slab_pool_give(&pool, middle, 1);
    slab_pool_give(&pool, other, 1);
    /* Last given, first taken. */
    CHECK(slab_pool_take(&pool, 1) == other);
    CHECK(slab_pool_take(&pool, 1) == middle);
    slab_pool_free(&pool);
}

/* Taking and giving back as many as were ever out needs no new slab. */
static void a_steady_load_takes_no_new_slab(void)
{
    struct slab_pool pool;
    slab_pool_init(&pool, classes, 3, SLAB_BYTES);
    enum { OUT = 10 };
    void *blocks[OUT];
    for (int i = 0; i < OUT; i++)
        REQUIRE((blocks[i] = slab_pool_take(&pool, 1)) != NULL);
    void *newest_slab = pool.slabs;
    size_t used = pool.slab_used;
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < OUT; i++)
            slab_pool_give(&pool, blocks[i], 1);
        for (int i = 0; i < OUT; i++)
            REQUIRE((blocks[i] = slab_pool_take(&pool, 1)) != NULL);
    }
    CHECK(pool.slabs == newest_slab);
    CHECK_EQ_U64(pool.slab_used, used);
    slab_pool_free(&pool);
}

/* A slab that cannot hold the next block leaves its tail and starts a new
 * one; the pool is usable again after being freed. */
static void a_full_slab_starts_another_and_a_freed_pool_starts_over(void)
{
    struct slab_pool pool;
    slab_pool_init(&pool, classes, 3, SLAB_BYTES);
    /* 4096 bytes less the link line: three 1024-byte blocks fit. */
    for (int i = 0; i < 3; i++)
        REQUIRE(slab_pool_take(&pool, 2) != NULL);
    void *first_slab = pool.slabs;
    REQUIRE(slab_pool_take(&pool, 2) != NULL);
    CHECK(pool.slabs != first_slab);
    CHECK(*(void **)pool.slabs == first_slab);
    slab_pool_free(&pool);
    CHECK(pool.slabs == NULL);
    void *again = slab_pool_take(&pool, 0);
    CHECK(again != NULL);
    slab_pool_free(&pool);
}

int main(void)
{
    RUN(a_block_gets_the_smallest_class_that_holds_it,
        "a size gets the smallest class that holds it");
    RUN(blocks_are_aligned_and_never_overlap,
        "blocks of every class, over several slabs, are aligned and never overlap");
    RUN(a_block_given_back_is_taken_again_in_its_class_only,
        "a block given back is taken again, last in first out, and only in its class");
    RUN(a_steady_load_takes_no_new_slab,
        "taking and giving back as many as were out needs no new slab");
    RUN(a_full_slab_starts_another_and_a_freed_pool_starts_over,
        "a full slab starts another, and a freed pool starts over");
    return test_summary();
}
