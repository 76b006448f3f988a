/* Unit tests for strset.c: membership, duplicates, growth past the first table. */
#include <stdio.h>
#include <string.h>

#include "base/strset.h"
#include "check.h"

int main(void)
{
  struct strset s = {0};
  CHECK(!strset_has(&s, "a")); /* empty set: no table yet */
  CHECK(strset_add(&s, "a") == 1);
  CHECK(strset_add(&s, "a") == 0);
  CHECK(strset_has(&s, "a"));
  CHECK(!strset_has(&s, "b"));
  CHECK(strset_add(&s, "") == 1 && strset_has(&s, ""));
  /* Many keys: the table grows several times; every key stays findable, none is counted twice. */
  char key[32];
  int added = 0;
  for (int i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "dir/%d", i);
    added += strset_add(&s, key);
  }
  CHECK(added == 5000);
  CHECK(s.n == 5002);
  int found = 0;
  for (int i = 0; i < 5000; i++) {
    snprintf(key, sizeof key, "dir/%d", i);
    found += strset_has(&s, key) && strset_add(&s, key) == 0;
  }
  CHECK(found == 5000);
  CHECK(!strset_has(&s, "dir/5000"));
  CHECK(s.n * 2 <= s.cap);
  strset_free(&s);
  CHECK(s.n == 0 && s.cap == 0 && !strset_has(&s, "a"));
  return check_summary("test_strset");
}
