/* libFuzzer target: the policy parser and its canonical formatter. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  struct sbx_policy *p = NULL;
  sbx_error_t err;
  /* Includes resolve in a directory that does not exist, so they fail cleanly. */
  if (policy_parse_string(text, "fuzz.policy", "/nonexistent", &p, &err) == 0) {
    char *canon = policy_format(p);
    /* The canonical text must parse back to the same hash. */
    struct sbx_policy *q = NULL;
    if (canon && policy_parse_string(canon, "canon.policy", "/nonexistent", &q, &err) == 0) {
      if (strcmp(p->sha256, q->sha256) != 0)
        abort();
      policy_free(q);
    }
    free(canon);
    policy_free(p);
  }
  free(text);
  return 0;
}
