/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the image files: see image_util.h. */
#include "image/image_util.h"

#include <string.h>
#include <sys/mman.h>

const char *image_shown(const char *s, char buf[160])
{
  size_t o = 0;
  for (const unsigned char *c = (const unsigned char *) s; *c && o < 150; c++) {
    static const char hex[] = "0123456789abcdef";
    if (*c < 0x20 || *c == 0x7f) {
      memcpy(buf + o, "\\x", 2);
      buf[o + 2] = hex[*c >> 4];
      buf[o + 3] = hex[*c & 15];
      o += 4;
    } else
      buf[o++] = (char) *c;
    if (o >= 150 && c[1]) {
      memcpy(buf + 150, "...", 4);
      return buf;
    }
  }
  buf[o < 160 ? o : 159] = '\0';
  return buf;
}

void image_unmapp(struct mapping *m)
{
  if (m->data && m->len)
    munmap(m->data, m->len);
  m->data = NULL;
}

int image_map_fd(int fd, size_t len, struct mapping *ret)
{
  ret->len = len;
  ret->data = NULL;
  if (len == 0)
    return 0;
  void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED)
    return -1;
  ret->data = p;
  return 0;
}
