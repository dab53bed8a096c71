/* kcmp compares kernel objects (files, memory, fs, signal handlers) of two
 * processes: an oracle about a process outside the cage. KCMP_VM needs no
 * fds. The seccomp filter refuses kcmp with EPERM. */
#include <linux/kcmp.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  long ret = syscall(SYS_kcmp, (long)getpid(), pid, KCMP_VM, 0, 0);
  if (ret >= 0) escaped("kcmp(self, %ld, KCMP_VM) answered %ld", pid, ret);
  blocked(errno, "kcmp(self, %ld, KCMP_VM)", pid);
}
