/* A new mount namespace, the first step to undoing the noexec binds or
 * mounting over the grants. The seccomp filter refuses unshare with EPERM. */
#include <sched.h>

#include "probe.h"

int main(void) {
  if (unshare(CLONE_NEWNS) == 0) escaped("unshare(CLONE_NEWNS) made a new mount namespace");
  blocked(errno, "unshare(CLONE_NEWNS)");
}
