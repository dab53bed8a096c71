/* Tracing a process outside the cage (the agent, a shell of the same user):
 * a tracer reads and writes its memory and registers. PTRACE_SEIZE attaches
 * without stopping the tracee (the kernel detaches when the probe exits).
 * The seccomp filter refuses ptrace with EPERM (Landlock's ptrace scoping and
 * the user namespace would refuse it behind that). */
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  long ret = syscall(SYS_ptrace, PTRACE_SEIZE, pid, 0, 0);
  if (ret == 0) escaped("PTRACE_SEIZE attached to outside pid %ld", pid);
  blocked(errno, "PTRACE_SEIZE outside pid %ld", pid);
}
