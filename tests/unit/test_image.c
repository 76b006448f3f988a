/* Unit tests for the image module's pure parts: member-name normalisation (image_layer.c) and tree
 * names (image.c). */
#include <limits.h>
#include <string.h>

#include "check.h"
#include "image/image.h"

static int norm(const char *in, const char *want)
{
  char out[PATH_MAX];
  sbx_error_t err = {0};
  if (image_path_normalize(in, out, sizeof out, &err) < 0)
    return want == NULL;
  return want && !strcmp(out, want);
}

int main(void)
{
  CHECK(norm("a/b/c", "a/b/c"));
  CHECK(norm("./a//b/./c/", "a/b/c"));
  CHECK(norm("/etc/passwd", "etc/passwd"));
  CHECK(norm("///", ""));
  CHECK(norm(".", ""));
  CHECK(norm("a/..b/c..", "a/..b/c.."));
  CHECK(norm("..", NULL));
  CHECK(norm("a/../b", NULL));
  CHECK(norm("/../x", NULL));
  CHECK(norm("new\nline", NULL));
  CHECK(norm("tab\t", NULL));
  CHECK(norm("del\x7f", NULL));
  char longc[300];
  memset(longc, 'x', sizeof longc - 1);
  longc[sizeof longc - 1] = '\0';
  CHECK(norm(longc, NULL));
  longc[255] = '\0';
  CHECK(norm(longc, longc));
  static char longp[PATH_MAX + 10];
  for (size_t i = 0; i < sizeof longp - 1; i++)
    longp[i] = i % 100 == 99 ? '/' : 'y';
  CHECK(norm(longp, NULL));
  char small[8];
  sbx_error_t err = {0};
  CHECK(image_path_normalize("abcdefgh", small, sizeof small, &err) < 0 && strstr(err.msg, "too long"));

  CHECK(image_name_valid("python-3.14-slim"));
  CHECK(image_name_valid("a"));
  CHECK(!image_name_valid(""));
  CHECK(!image_name_valid(".hidden"));
  CHECK(!image_name_valid("-x"));
  CHECK(!image_name_valid("a/b"));
  CHECK(!image_name_valid(".."));
  CHECK(!image_name_valid("a b"));
  return check_summary("test_image");
}
