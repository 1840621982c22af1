/* The offload thread (src/server/offload.h): jobs run in the order given, on
 * a thread of their own, at most jobs_max wait while one runs (one past it is
 * refused and never run), and stop runs those still waiting. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/offload.h"
#include "test.h"

#define JOBS_MAX 3

/* A job that holds the thread until the test lets it go. */
struct gate {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool entered;
    bool open;
    pthread_t thread;
};

static void gate_job(void *context)
{
    struct gate *g = context;
    pthread_mutex_lock(&g->mutex);
    g->entered = true;
    g->thread = pthread_self();
    pthread_cond_broadcast(&g->cond);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->mutex);
    pthread_mutex_unlock(&g->mutex);
}

/* Each job appends its number: the order they ran in. */
struct order {
    uint32_t ran[JOBS_MAX + 2];
    uint32_t count;
};
static struct order order;
static uint32_t numbers[JOBS_MAX + 2];

static void numbered_job(void *context)
{
    order.ran[order.count++] = *(const uint32_t *)context; /* one thread: no lock */
}

static void bounded_and_in_order(void)
{
    struct offload *offload = NULL;
    REQUIRE(offload_start(JOBS_MAX, &offload) == 0);
    struct gate g = {.entered = false, .open = false};
    pthread_mutex_init(&g.mutex, NULL);
    pthread_cond_init(&g.cond, NULL);
    REQUIRE(offload_submit(offload, gate_job, &g));
    pthread_mutex_lock(&g.mutex);
    while (!g.entered)
        pthread_cond_wait(&g.cond, &g.mutex);
    pthread_mutex_unlock(&g.mutex);
    CHECK(!pthread_equal(g.thread, pthread_self()));
    /* The running job holds no place: jobs_max more wait, one past is refused. */
    for (uint32_t i = 0; i < JOBS_MAX + 1; i++) {
        numbers[i] = i;
        bool accepted = offload_submit(offload, numbered_job, &numbers[i]);
        CHECK(accepted == (i < JOBS_MAX));
    }
    pthread_mutex_lock(&g.mutex);
    g.open = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.mutex);
    offload_stop(offload); /* runs the ones still waiting */
    CHECK_EQ_U64(order.count, JOBS_MAX);
    for (uint32_t i = 0; i < order.count; i++)
        CHECK_EQ_U64(order.ran[i], i);
    pthread_cond_destroy(&g.cond);
    pthread_mutex_destroy(&g.mutex);
}

int main(void)
{
    RUN(bounded_and_in_order,
        "jobs run in order off the caller's thread; while one runs, jobs_max wait and one past "
        "it is refused and never run; stop runs those still waiting");
    return test_summary();
}
