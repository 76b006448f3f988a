/* SPDX-License-Identifier: Apache-2.0 */
/* A set of strings (open addressing, FNV-1a): which paths a layer wrote, which directories got
 * their attributes. Keys are copied. */
#ifndef SBX_STRSET_H
#define SBX_STRSET_H

#include <stdbool.h>
#include <stddef.h>

struct strset {
  char **slots;
  size_t cap, n;
};

bool strset_has(const struct strset *s, const char *key);
/* 1 if added, 0 if present, -1 (ENOMEM). */
int strset_add(struct strset *s, const char *key);
void strset_free(struct strset *s);

#endif
