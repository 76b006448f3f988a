/* SPDX-License-Identifier: Apache-2.0 */
/* Singly linked lists threaded through a `next` field: the call queue, the warm pool, the
 * proxy's calls in flight, a host server's operations. head is the address of the list's first
 * pointer (`&srv->calls`). */
#ifndef SBX_SLIST_H
#define SBX_SLIST_H

#include <stdbool.h>
#include <stddef.h>

/* Take item out of the list; true if it was in it. */
#define slist_unlink(head, item)                                                                             \
  ({                                                                                                         \
    __typeof__(*(head)) *slist_p_ = (head);                                                                  \
    __typeof__(*(head)) slist_it_ = (item);                                                                  \
    while (*slist_p_ && *slist_p_ != slist_it_)                                                              \
      slist_p_ = &(*slist_p_)->next;                                                                         \
    bool slist_found_ = *slist_p_ != NULL;                                                                   \
    if (slist_found_)                                                                                        \
      *slist_p_ = slist_it_->next;                                                                           \
    slist_found_;                                                                                            \
  })

/* Add item (whose next is NULL) at the end: lists are kept in arrival order. */
#define slist_append(head, item)                                                                             \
  do {                                                                                                       \
    __typeof__(*(head)) *slist_p_ = (head);                                                                  \
    while (*slist_p_)                                                                                        \
      slist_p_ = &(*slist_p_)->next;                                                                         \
    *slist_p_ = (item);                                                                                      \
  } while (0)

#endif
