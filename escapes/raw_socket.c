/* AF_INET SOCK_RAW: hand-made IP packets (any protocol, spoofed headers), past
 * Landlock's TCP port rules. What stops it: seccomp refuses AF_INET under net
 * none and raw types under egress-allowlist (EPERM). The kernel's CAP_NET_RAW
 * check also answers EPERM, so when the real call is refused the probe asks
 * again with protocol 1000 (>= IPPROTO_MAX): the kernel rejects that (EINVAL)
 * before any capability check. */
#include <netinet/in.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  int fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
  if (fd >= 0) escaped("socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) made fd %d", fd);
  if (errno != EPERM) escaped("socket(AF_INET, SOCK_RAW) reached the kernel: %s", probe_errno_name(errno));
  long ret = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, 1000);
  verdict_reached_kernel("socket(AF_INET, SOCK_RAW, invalid protocol)", ret, errno, EPERM);
}
