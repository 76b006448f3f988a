/* SPDX-License-Identifier: Apache-2.0 */
/* The string set: see strset.h. */
#include "base/strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char) *s) * 1099511628211ULL;
  return h;
}

bool strset_has(const struct strset *s, const char *key)
{
  if (!s->cap)
    return false;
  for (size_t i = hash_str(key) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (!s->slots[i])
      return false;
    if (!strcmp(s->slots[i], key))
      return true;
  }
}

static int strset_insert(char **slots, size_t cap, char *key)
{
  for (size_t i = hash_str(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
    if (!slots[i]) {
      slots[i] = key;
      return 1;
    }
    if (!strcmp(slots[i], key))
      return 0;
  }
}

int strset_add(struct strset *s, const char *key)
{
  if (strset_has(s, key))
    return 0;
  if ((s->n + 1) * 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    char **slots = calloc(cap, sizeof *slots);
    if (!slots)
      return -1;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i])
        strset_insert(slots, cap, s->slots[i]);
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  char *k = strdup(key);
  if (!k)
    return -1;
  strset_insert(s->slots, s->cap, k);
  s->n++;
  return 1;
}

void strset_free(struct strset *s)
{
  for (size_t i = 0; i < s->cap; i++)
    free(s->slots[i]);
  free(s->slots);
  *s = (struct strset){0};
}
