/* SPDX-License-Identifier: Apache-2.0 */
/* The host's own addresses (egress_host.h). */
#include "egress/egress_host.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int egress_host_addrs(struct egress_addr **ret, size_t *ret_n, sbx_error_t *err)
{
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) < 0)
    return sbx_error_errno(err, "getifaddrs");
  size_t n = 0, cap = 0;
  struct egress_addr *v = NULL;
  for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
      continue;
    if (n == cap) {
      struct egress_addr *nv = realloc(v, (cap = cap ? cap * 2 : 8) * sizeof *v);
      if (!nv) {
        free(v);
        freeifaddrs(ifa);
        return sbx_error_set(err, ENOMEM, "host addresses");
      }
      v = nv;
    }
    struct egress_addr a = {0};
    if (i->ifa_addr->sa_family == AF_INET) {
      a.family = 4;
      memcpy(a.a, &((const struct sockaddr_in *) (const void *) i->ifa_addr)->sin_addr, 4);
    } else {
      a.family = 6;
      memcpy(a.a, &((const struct sockaddr_in6 *) (const void *) i->ifa_addr)->sin6_addr, 16);
    }
    v[n++] = a;
  }
  freeifaddrs(ifa);
  *ret = v;
  *ret_n = n;
  return 0;
}
