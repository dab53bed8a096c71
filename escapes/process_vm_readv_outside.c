/* Reading a process outside the cage with process_vm_readv (no ptrace
 * attach needed, only the ptrace access check). The seccomp filter refuses
 * it with EPERM. Unconfined the call passes the access check and reads the
 * first mapping named in /proc/<pid>/maps (or, where that is unreadable, an
 * unmapped address: EFAULT, which the kernel answers only after the access
 * check; a failed access check answers EPERM). */
#include <sys/uio.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
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
  if (n >= 0) escaped("read %zd bytes of outside pid %ld at %#lx", n, pid, (unsigned long)remote.iov_base);
  int err = errno;
  /* ESRCH: no such process here (the job's own pid namespace). */
  if (err == EPERM || err == ESRCH) blocked(err, "process_vm_readv outside pid %ld", pid);
  escaped("process_vm_readv passed the access check on pid %ld: %s at %#lx", pid, probe_errno_name(err),
          (unsigned long)remote.iov_base);
}
