/* Tracing a process of the job's own: a child it forked. What a debugger,
 * strace and LeakSanitizer do. Refused by seccomp (EPERM) unless the policy
 * asks for debug; there it is the job's to do (allowed), and the probes
 * aimed at the init and outside the job show that nothing else is. */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

int main(void) {
  pid_t child = fork();
  if (child < 0) probe_error("fork: %s", probe_errno_name(errno));
  if (child == 0) {
    pause();
    _exit(0);
  }
  long ret = syscall(SYS_ptrace, PTRACE_SEIZE, child, 0, 0);
  int err = errno;
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (ret == 0) escaped("PTRACE_SEIZE attached to its own child, pid %d", (int)child);
  blocked(err, "PTRACE_SEIZE its own child, pid %d", (int)child);
}
