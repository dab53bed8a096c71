/* A user namespace through clone(2) rather than unshare(2): the seccomp
 * filter checks clone's flags word (one rule per CLONE_NEW* flag) and
 * refuses CLONE_NEWUSER with EPERM. The child, if any, exits at once. */
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "probe.h"

int main(void) {
  /* x86_64 raw clone: flags, stack (0: share the copied stack, like fork),
   * parent_tid, child_tid, tls. */
  long ret = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, NULL, NULL, 0L);
  if (ret == 0) syscall(SYS_exit_group, 0);
  if (ret > 0) {
    waitpid((pid_t)ret, NULL, 0);
    escaped("clone(CLONE_NEWUSER) made child %ld in a new user namespace", ret);
  }
  blocked(errno, "clone(CLONE_NEWUSER)");
}
