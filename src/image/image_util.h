/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by the image files (image*.c), not used elsewhere. */
#ifndef SBX_IMAGE_UTIL_H
#define SBX_IMAGE_UTIL_H

#include <stddef.h>

/* User data for a one-line message: control characters escaped, long names cut. Returns buf. */
const char *image_shown(const char *s, char buf[160]);

/* A read-only private mapping of a whole file (len 0: data NULL, nothing mapped). */
struct mapping {
  void *data;
  size_t len;
};
int image_map_fd(int fd, size_t len, struct mapping *ret);
/* For __attribute__((cleanup)); also safe to call twice. */
void image_unmapp(struct mapping *m);

#endif
