/* A new user namespace: full capabilities over new namespaces, and the
 * kernel attack surface that opens (user-namespace privilege escalations).
 * The seccomp filter refuses unshare with EPERM. */
#include <sched.h>

#include "probe.h"

int main(void) {
  if (unshare(CLONE_NEWUSER) == 0) escaped("unshare(CLONE_NEWUSER) made a new user namespace");
  blocked(errno, "unshare(CLONE_NEWUSER)");
}
