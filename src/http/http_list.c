/* The workers' timer lists (see http_internal.h): every entry of one list
 * has the same timeout, so each list is in deadline order by construction,
 * and the one clock they are read on. */
#include "http_internal.h"

#include <assert.h>

#include "core/clock.h"
#include "util/queue.h"

int64_t http_now_ms(void)
{
    return clock_monotonic_ms();
}

void http_list_push(struct http_list *list, struct http_link *link, int64_t now_ms)
{
    assert(!link->linked);
    link->at_ms = now_ms;
    DLIST_PUSH_BACK(list->head, list->tail, link, previous, next);
    link->linked = true;
}

void http_list_remove(struct http_list *list, struct http_link *link)
{
    if (!link->linked)
        return;
    DLIST_REMOVE(list->head, list->tail, link, previous, next);
    link->linked = false;
}

void http_list_touch(struct http_list *list, struct http_link *link, int64_t now_ms)
{
    assert(link->linked);
    if (list->tail != link) {
        http_list_remove(list, link);
        http_list_push(list, link, now_ms);
    }
    link->at_ms = now_ms;
}
