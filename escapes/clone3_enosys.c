/* clone3 passes its flags in memory a seccomp filter cannot read, so a
 * filter that checks clone's flags must refuse clone3 entirely, and with
 * ENOSYS so that libc falls back to clone (where the flags are checked).
 * Unconfined, a NULL args pointer reaches the kernel: EFAULT. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_clone3, NULL, 88 /* CLONE_ARGS_SIZE_VER2 */);
  verdict_reached_kernel("clone3(NULL, 88)", ret, errno, ENOSYS);
}
