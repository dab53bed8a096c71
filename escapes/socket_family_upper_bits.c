/* socket()'s family is an int: the kernel ignores the upper 32 bits of the
 * register, a BPF filter sees all 64. A rule written as "family == AF_UNIX"
 * or "family == AF_NETLINK" misses AF_NETLINK | 1 << 32. What stops it: the
 * filter's "family >= AF_INET6 + 1" row compares all 64 bits, so any upper
 * bit lands there (EPERM). Tries AF_NETLINK, then AF_UNIX (the family the
 * no-broker rule names). */
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  const unsigned long high = 1UL << 32;
  long fd = syscall(SYS_socket, high | AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd >= 0) escaped("socket(AF_NETLINK | 1 << 32, NETLINK_ROUTE) made fd %ld", fd);
  int first = errno;
  fd = syscall(SYS_socket, high | AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) escaped("socket(AF_UNIX | 1 << 32, SOCK_STREAM) made fd %ld", fd);
  int second = errno;
  if (first != EPERM) escaped("socket(AF_NETLINK | 1 << 32) reached the kernel: %s", probe_errno_name(first));
  if (second != EPERM) escaped("socket(AF_UNIX | 1 << 32) reached the kernel: %s", probe_errno_name(second));
  blocked(EPERM, "socket(AF_NETLINK | 1 << 32) and socket(AF_UNIX | 1 << 32) refused");
}
