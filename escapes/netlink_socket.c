/* AF_NETLINK NETLINK_ROUTE: an unprivileged process reads (and, with
 * capabilities in a user namespace, changes) the host's interfaces, routes
 * and addresses; netlink families are kernel attack surface. What stops it:
 * seccomp refuses every socket family but unix, IPv4 and IPv6 (EPERM). */
#include <linux/netlink.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) blocked(errno, "socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)");
  escaped("socket(AF_NETLINK, NETLINK_ROUTE) made fd %d", fd);
}
