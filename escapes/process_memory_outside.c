/* Reaching the memory of a process outside the cage without ptrace:
 * process_madvise(2) (page hints on another process, Linux 5.10) and
 * move_pages(2) (where another process's pages live, NUMA). Neither is in
 * the seccomp table: both take the kernel's ptrace access check on the
 * target (mm_access, find_mm_struct), which fails twice over for any
 * process outside the cage, whatever the uid: Landlock refuses a target
 * outside the sandbox's domain, and the launcher's user namespace leaves
 * the module without CAP_SYS_PTRACE over a process of the host's (commoncap
 * asks for it across user namespaces). process_madvise answers EACCES,
 * move_pages EPERM.
 *
 * Harmless when it reaches: process_madvise gives MADV_COLD for page 1
 * (never mapped: ENOMEM once the access checks passed) and move_pages asks
 * the node of zero pages (0). Escaped if either reached the target's
 * memory map. */
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "probe.h"

#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  /* ESRCH: the pid is not in this pid namespace (a supervised job's own). */
  if (pidfd < 0 && errno == ESRCH) blocked(ESRCH, "pidfd_open(%ld): no such process in this pid namespace", pid);
  if (pidfd < 0) probe_error("pidfd_open(%ld): %s", pid, probe_errno_name(errno));

  struct iovec page = {(void *)4096, 4096};
  long rc_pm = syscall(SYS_process_madvise, pidfd, &page, 1UL, MADV_COLD, 0U);
  int e_pm = errno;
  long rc_mp = syscall(SYS_move_pages, (pid_t)pid, 0UL, NULL, NULL, NULL, 0);
  int e_mp = errno;
  close(pidfd);

  char seen[200];
  snprintf(seen, sizeof seen, "process_madvise(pid %ld, MADV_COLD, page 1)=%s move_pages(pid %ld, 0 pages)=%s", pid,
           rc_pm >= 0 ? "ok" : probe_errno_name(e_pm), pid, rc_mp >= 0 ? "ok" : probe_errno_name(e_mp));
  if (rc_pm >= 0 || e_pm == ENOMEM || rc_mp >= 0) escaped("reached the memory map of a process outside: %s", seen);
  if (e_pm == ENOSYS && e_mp == ENOSYS) unsupported("kernel without process_madvise and move_pages: %s", seen);
  blocked(e_pm != ENOSYS ? e_pm : e_mp, "%s", seen);
}
