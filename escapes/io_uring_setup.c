/* io_uring performs socket, connect, openat, sendmsg... inside the kernel
 * without the syscalls a seccomp filter sees. The ring itself is the escape.
 * What stops it: seccomp refuses io_uring_setup (and _enter, _register)
 * under every policy (EPERM). A NULL params pointer makes an unfiltered
 * kernel answer EFAULT. kernel.io_uring_disabled=2 makes the kernel itself
 * refuse every ring (EPERM): then the route does not exist. */
#include <sys/syscall.h>

#include "probe.h"

static int io_uring_disabled(void) {
  FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
  int v = 0;
  if (f != NULL) {
    if (fscanf(f, "%d", &v) != 1) v = 0;
    fclose(f);
  }
  return v;
}

int main(void) {
  long ret = syscall(SYS_io_uring_setup, 1, NULL);
  int err = errno;
  if (ret == -1 && err == EPERM && io_uring_disabled() == 2)
    unsupported("io_uring_setup: EPERM with kernel.io_uring_disabled=2 (no rings on this host)");
  verdict_reached_kernel("io_uring_setup(1, NULL)", ret, err, EPERM);
}
