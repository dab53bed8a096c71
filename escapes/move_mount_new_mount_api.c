/* move_mount attaches a detached tree (open_tree, fsmount) or moves a mount:
 * a way to mount over a grant without mount(2). The seccomp filter refuses
 * it with EPERM. Bad path pointers make an unfiltered call fail with EFAULT
 * (after the may_mount check, which root passes unconfined). */
#include <fcntl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_move_mount, AT_FDCWD, (const char *)1, AT_FDCWD, (const char *)1, 0);
  verdict_reached_kernel("move_mount(<bad pointer>, <bad pointer>)", ret, errno, EPERM);
}
