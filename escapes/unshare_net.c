/* A new network namespace (own interfaces, routes, netfilter: kernel
 * attack surface, and a way around net.mode rules tied to the old one). The
 * seccomp filter refuses unshare with EPERM. */
#include <sched.h>

#include "probe.h"

int main(void) {
  if (unshare(CLONE_NEWNET) == 0) escaped("unshare(CLONE_NEWNET) made a new network namespace");
  blocked(errno, "unshare(CLONE_NEWNET)");
}
