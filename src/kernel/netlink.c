/* SPDX-License-Identifier: Apache-2.0 */
#include "kernel/netlink.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <time.h>

int netlink_loopback_up(sbx_error_t *err)
{
  char buf[MNL_SOCKET_BUFFER_SIZE < 8192 ? MNL_SOCKET_BUFFER_SIZE : 8192];
  struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (!nl)
    return sbx_error_errno(err, "netlink socket");
  int ret = -1;
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
    sbx_error_errno(err, "netlink bind");
    goto out;
  }
  struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = 1;
  struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof *ifm);
  ifm->ifi_family = AF_UNSPEC;
  ifm->ifi_index = 1; /* loopback is always ifindex 1 in a new network namespace */
  ifm->ifi_flags = IFF_UP;
  ifm->ifi_change = IFF_UP;
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
    sbx_error_errno(err, "netlink send");
    goto out;
  }
  ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
  if (n < 0) {
    sbx_error_errno(err, "netlink receive");
    goto out;
  }
  /* The ack carries an error code; mnl_cb_run turns a negative one into errno. */
  if (mnl_cb_run(buf, (size_t) n, 1, mnl_socket_get_portid(nl), NULL, NULL) < 0) {
    sbx_error_errno(err, "bring loopback up");
    goto out;
  }
  ret = 0;
out:
  mnl_socket_close(nl);
  return ret;
}
