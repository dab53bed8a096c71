/* Tracing the job's init, pid 1 of its pid namespace (OARBANK_PROBE_INIT_PID:
 * 1 under run; outside the supervisor, which starts no init, the harness's
 * outside process). The init holds every capability in the job's user
 * namespace: a tracer that reached it could make the namespaces, mounts and
 * devices the cage refuses. PTRACE_SEIZE attaches without stopping it.
 * Refused by seccomp (EPERM); under a debug policy, where the job may trace
 * its own processes, by the kernel: the init is not dumpable, and it lies
 * outside the job's Landlock domain (EPERM). */
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_INIT_PID");
  long ret = syscall(SYS_ptrace, PTRACE_SEIZE, pid, 0, 0);
  if (ret == 0) escaped("PTRACE_SEIZE attached to the init, pid %ld", pid);
  blocked(errno, "PTRACE_SEIZE the init, pid %ld", pid);
}
