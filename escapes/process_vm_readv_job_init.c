/* Reading the job's init with process_vm_readv (OARBANK_PROBE_INIT_PID, as
 * in ptrace_job_init.c): its memory holds what it was started with. Only
 * the ptrace access check stands in the way, no attach. Refused by seccomp
 * (EPERM); under a debug policy by the kernel: the init is not dumpable
 * (EPERM). Unconfined the call passes the access check and reads the first
 * mapping of /proc/<pid>/maps (or answers EFAULT for an unmapped address,
 * which the kernel answers only after the check). */
#include <sys/uio.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_INIT_PID");
  char maps_path[64];
  snprintf(maps_path, sizeof maps_path, "/proc/%ld/maps", pid);
  unsigned long start = 0;
  FILE *maps = fopen(maps_path, "re");
  if (maps) {
    if (fscanf(maps, "%lx-", &start) != 1) start = 0;
    fclose(maps);
  }
  char buf[16];
  struct iovec local = {buf, sizeof buf};
  struct iovec remote = {(void *)(start ? start : 0x10000), sizeof buf};
  ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
  if (n >= 0) escaped("read %zd bytes of the init, pid %ld, at %#lx", n, pid, (unsigned long)remote.iov_base);
  int err = errno;
  /* ESRCH: no such process here (the job's own pid namespace). */
  if (err == EPERM || err == ESRCH) blocked(err, "process_vm_readv the init, pid %ld", pid);
  escaped("process_vm_readv passed the access check on the init, pid %ld: %s at %#lx", pid, probe_errno_name(err),
          (unsigned long)remote.iov_base);
}
