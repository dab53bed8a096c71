/* Loading a kernel module. The seccomp filter refuses init_module,
 * finit_module and delete_module with EPERM. Unconfined as root,
 * finit_module(-1) answers EBADF, init_module(<bad pointer>) EFAULT and
 * delete_module(<bad pointer>) EFAULT after the capability check. A kernel
 * built without module support answers ENOSYS to all three: the route does
 * not exist there (unsupported). */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long r_f = syscall(SYS_finit_module, -1, "", 0);
  int e_f = errno;
  long r_i = syscall(SYS_init_module, (void *)1, 1UL, "");
  int e_i = errno;
  long r_d = syscall(SYS_delete_module, (const char *)1, 0);
  int e_d = errno;
  char seen[200];
  snprintf(seen, sizeof seen, "finit_module(-1)=%s init_module(<bad pointer>)=%s delete_module(<bad pointer>)=%s",
           r_f >= 0 ? "ok" : probe_errno_name(e_f), r_i >= 0 ? "ok" : probe_errno_name(e_i),
           r_d >= 0 ? "ok" : probe_errno_name(e_d));
  if (r_f < 0 && e_f == EPERM && r_i < 0 && e_i == EPERM && r_d < 0 && e_d == EPERM) blocked(EPERM, "%s", seen);
  if (r_f < 0 && e_f == ENOSYS && r_i < 0 && e_i == ENOSYS && r_d < 0 && e_d == ENOSYS)
    unsupported("kernel built without module support (CONFIG_MODULES=n): %s", seen);
  escaped("module loading reached the kernel: %s", seen);
}
