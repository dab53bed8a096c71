/* open_tree_attr (Linux 6.15) is open_tree with mount attributes: a
 * detached clone of a mount tree, then move_mount to attach it, without
 * mount(2) or open_tree(2). A filter that names open_tree but not its newer
 * sibling lets it through (the new mount API behind flatpak's
 * CVE-2021-41133). The seccomp filter refuses it with EPERM; a kernel older
 * than 6.15 has no such call (ENOSYS, unsupported), and where the kernel has it
 * a confined ENOSYS (a filter that stopped below it) is no verdict the
 * table allows. Root unconfined gets a clone of
 * "/". */
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "probe.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#define PROBE_SYS_OPEN_TREE_ATTR 467 /* x86-64 and the generic table alike */

int main(void) {
  long fd = syscall(PROBE_SYS_OPEN_TREE_ATTR, AT_FDCWD, "/", OPEN_TREE_CLONE | O_CLOEXEC, NULL, 0);
  if (fd < 0 && errno == ENOSYS) unsupported("open_tree_attr: ENOSYS (Linux 6.15 added it)");
  verdict_reached_kernel("open_tree_attr(\"/\", OPEN_TREE_CLONE)", fd, errno, EPERM);
}
