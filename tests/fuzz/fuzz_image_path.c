/* libFuzzer target: the layer extractor's path handling (image_path_normalize). Whatever the
 * archive says, an accepted name is relative, has no "..", "." or empty component and no control
 * character, so it cannot leave the tree before resolution even starts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char in[8192], out[8192];
  if (size >= sizeof in)
    size = sizeof in - 1;
  memcpy(in, data, size);
  in[size] = '\0';
  sbx_error_t err;
  if (image_path_normalize(in, out, sizeof out, &err) < 0)
    return 0;
  size_t n = strlen(out);
  if (out[0] == '/' || (n && out[n - 1] == '/'))
    abort();
  for (const char *c = out; *c; c++)
    if ((unsigned char) *c < 0x20 || *c == 0x7f)
      abort();
  /* components */
  char *copy = strdup(out), *save = NULL;
  for (char *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save))
    if (!strcmp(t, "..") || !strcmp(t, "."))
      abort();
  if (strstr(out, "//"))
    abort();
  free(copy);
  return 0;
}
