/* AF_PACKET: raw frames on the host's interfaces (sniffing, spoofing; a
 * recurring source of kernel bugs). What stops it: seccomp refuses the family
 * (EPERM). The kernel's CAP_NET_RAW check also answers EPERM, so when the
 * real call is refused the probe asks again with an invalid type: the kernel
 * rejects that (EINVAL) before any capability check, the filter (EPERM) does
 * not look at the type. */
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <sys/socket.h>

#include "probe.h"

int main(void) {
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd >= 0) escaped("socket(AF_PACKET, SOCK_RAW, ETH_P_ALL) made fd %d", fd);
  if (errno != EPERM) escaped("socket(AF_PACKET) reached the kernel: %s", probe_errno_name(errno));
  long ret = socket(AF_PACKET, 0xf /* >= SOCK_MAX */, 0);
  verdict_reached_kernel("socket(AF_PACKET, invalid type)", ret, errno, EPERM);
}
