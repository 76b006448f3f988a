/* Unit tests for slist.h: append keeps arrival order; unlink takes out the head, a middle and the
 * tail item, and says false (changing nothing) for an item not in the list. */
#include <stddef.h>

#include "base/slist.h"
#include "check.h"

struct item {
  int v;
  struct item *next;
};

/* The list's values as digits, e.g. 123; -1 on a loop longer than the test's lists. */
static int digits(const struct item *head)
{
  int n = 0, len = 0;
  for (const struct item *i = head; i; i = i->next)
    if (++len > 9)
      return -1;
    else
      n = n * 10 + i->v;
  return n;
}

int main(void)
{
  struct item a = {1, NULL}, b = {2, NULL}, c = {3, NULL}, d = {4, NULL}, stray = {9, NULL};
  struct item *head = NULL;
  CHECK(!slist_unlink(&head, &a)); /* empty list */
  CHECK(head == NULL);
  slist_append(&head, &a);
  slist_append(&head, &b);
  slist_append(&head, &c);
  slist_append(&head, &d);
  CHECK(digits(head) == 1234);
  CHECK(!slist_unlink(&head, &stray));
  CHECK(digits(head) == 1234);
  CHECK(slist_unlink(&head, &b)); /* middle */
  CHECK(digits(head) == 134);
  CHECK(!slist_unlink(&head, &b)); /* already out */
  CHECK(slist_unlink(&head, &a));  /* head */
  CHECK(head == &c && digits(head) == 34);
  CHECK(slist_unlink(&head, &d)); /* tail */
  CHECK(digits(head) == 3 && c.next == NULL);
  CHECK(slist_unlink(&head, &c)); /* the last one */
  CHECK(head == NULL);
  return check_summary("test_slist");
}
