/* open_tree(OPEN_TREE_CLONE) makes a detached copy of a mount tree that
 * move_mount can attach elsewhere, without mount(2). The seccomp filter
 * refuses open_tree with EPERM. Root unconfined gets a detached clone of "/". */
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long fd = syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  verdict_reached_kernel("open_tree(\"/\", OPEN_TREE_CLONE)", fd, errno, EPERM);
}
