/* process_vm_writev writes another process's memory without ptrace: a
 * process of the same uid outside the cage. The seccomp filter refuses it
 * (EPERM) as it refuses process_vm_readv; the pid namespace of run (ESRCH:
 * the pid does not exist there, under a debug policy too) and Landlock's
 * ptrace scope stand behind it. The probe writes nothing: its one byte is
 * aimed below mmap_min_addr, where nothing is ever mapped, so a kernel that
 * lets the call past its access check answers EFAULT (an escape: the write
 * was the caller's to make), and one that does not, EPERM. */
#include <sys/syscall.h>
#include <sys/uio.h>

#include "probe.h"

int main(void) {
  const pid_t outside = (pid_t)probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char byte = 0;
  struct iovec local = {&byte, 1}, remote = {(void *)0x1000, 1};
  long ret = syscall(SYS_process_vm_writev, outside, &local, 1, &remote, 1, 0);
  if (ret >= 0) escaped("process_vm_writev wrote %ld byte into outside pid %d", ret, (int)outside);
  int err = errno;
  if (err == EPERM || err == ESRCH) blocked(err, "process_vm_writev outside pid %d", (int)outside);
  escaped("process_vm_writev passed the access check on outside pid %d: %s", (int)outside, probe_errno_name(err));
}
