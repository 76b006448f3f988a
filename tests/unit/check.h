/* Minimal unit-test harness: CHECK counts, main prints `N passed, N failed`. */
#ifndef SBX_TEST_CHECK_H
#define SBX_TEST_CHECK_H
#include <stdio.h>

static int checks_passed, checks_failed;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (cond) {                                                                                    \
      checks_passed++;                                                                             \
    } else {                                                                                       \
      checks_failed++;                                                                             \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);                          \
    }                                                                                              \
  } while (0)

static inline int check_summary(const char *name)
{
  printf("%s: %d passed, %d failed\n", name, checks_passed, checks_failed);
  return checks_failed ? 1 : 0;
}
#endif
