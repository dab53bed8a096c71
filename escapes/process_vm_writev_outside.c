/* process_vm_writev writes another process's memory without ptrace: a
 * process of the same uid outside the cage. The seccomp filter refuses it
 * (EPERM) as it refuses process_vm_readv; the pid namespace of run and
 * Landlock's ptrace scope stand behind it. The probe writes nothing: its
 * vector is empty, so an unfiltered kernel answers 0 (or ESRCH, EPERM from
 * the kernel's own checks, both past the filter's EPERM only by its errno
 * detail). */
#include <sys/syscall.h>
#include <sys/uio.h>

#include "probe.h"

int main(void) {
  const pid_t outside = (pid_t)probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  struct iovec local = {0}, remote = {0};
  long ret = syscall(SYS_process_vm_writev, outside, &local, 0, &remote, 0, 0);
  verdict_reached_kernel("process_vm_writev(outside, empty)", ret, errno, EPERM);
}
