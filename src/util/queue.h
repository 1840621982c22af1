/* Intrusive lists, written once for the many structs that carry their own
 * links: a FIFO (singly linked, head and tail) and a list linked both ways
 * (head, and tail where its owner keeps one). The caller names the link
 * fields, so one struct can sit on several lists, as with BSD's
 * <sys/queue.h>. Not thread-safe: the owner holds whatever lock guards the
 * list. Macros evaluate their arguments more than once: pass plain lvalues
 * (w->wake_head, not a call). */
#ifndef LLMLIMIT_UTIL_QUEUE_H
#define LLMLIMIT_UTIL_QUEUE_H

#include <stddef.h>

/* Appends item at the tail of the FIFO (head, tail), linked through
 * item->next; item->next becomes NULL. */
#define FIFO_PUSH(head, tail, item, next)                                                          \
    do {                                                                                           \
        (item)->next = NULL;                                                                       \
        if ((tail) != NULL)                                                                        \
            (tail)->next = (item);                                                                 \
        else                                                                                       \
            (head) = (item);                                                                       \
        (tail) = (item);                                                                           \
    } while (0)

/* Puts item first in the list at head (no tail kept), linked both ways
 * through item->previous and item->next. */
#define DLIST_PUSH_FRONT(head, item, previous, next)                                               \
    do {                                                                                           \
        (item)->previous = NULL;                                                                   \
        (item)->next = (head);                                                                     \
        if ((head) != NULL)                                                                        \
            (head)->previous = (item);                                                             \
        (head) = (item);                                                                           \
    } while (0)

/* Appends item at the tail of the list (head, tail): a FIFO push that
 * also links item back to the old tail. */
#define DLIST_PUSH_BACK(head, tail, item, previous, next)                                          \
    do {                                                                                           \
        (item)->previous = (tail);                                                                 \
        FIFO_PUSH(head, tail, item, next);                                                         \
    } while (0)

/* The neighbour on item's `before` side now links past it to its `after`
 * side, or, with none there, `end` does: one half of a removal, the other
 * half being the same with the sides swapped. */
#define DLIST_BYPASS_(end, item, before, after)                                                    \
    do {                                                                                           \
        if ((item)->before != NULL)                                                                \
            (item)->before->after = (item)->after;                                                 \
        else                                                                                       \
            (end) = (item)->after;                                                                 \
    } while (0)

/* Takes item out of the list (head, tail); its links become NULL. */
#define DLIST_REMOVE(head, tail, item, previous, next)                                             \
    do {                                                                                           \
        DLIST_BYPASS_(head, item, previous, next);                                                 \
        DLIST_BYPASS_(tail, item, next, previous);                                                 \
        (item)->previous = (item)->next = NULL;                                                    \
    } while (0)

/* Takes item out of the list at head (no tail kept); its links become NULL. */
#define DLIST_REMOVE_NO_TAIL(head, item, previous, next)                                           \
    do {                                                                                           \
        DLIST_BYPASS_(head, item, previous, next);                                                 \
        if ((item)->next != NULL)                                                                  \
            (item)->next->previous = (item)->previous;                                             \
        (item)->previous = (item)->next = NULL;                                                    \
    } while (0)

#endif
