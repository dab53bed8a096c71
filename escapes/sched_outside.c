/* Changing the scheduling of a process outside the cage (the agent, same
 * uid): setpriority to nice 19, SCHED_IDLE, a one-CPU affinity, the idle I/O
 * class all starve it. The kernel allows these on any process with the
 * caller's uid whose permitted capabilities are a subset of the caller's
 * (commoncap), with no Landlock hook. Root confined is refused only because
 * the cage drops its capabilities while the outside root process keeps
 * them (EPERM); a uid without capabilities is refused by nothing. What must
 * stop it: seccomp rules refusing setpriority/ioprio_set with who != 0 and
 * sched_setaffinity/sched_setscheduler/sched_setparam/sched_setattr with
 * pid != 0, or a pid namespace. Each call sets the target's current value
 * again (same permission checks, no effect); escaped if any succeeds. */
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char seen[256] = "";
  int first_err = 0, ok = 0;
#define NOTE(what, rc)                                                                              \
  do {                                                                                              \
    int e_ = errno;                                                                                 \
    size_t len_ = strlen(seen);                                                                     \
    snprintf(seen + len_, sizeof seen - len_, "%s%s=%s", len_ ? " " : "", what, (rc) == 0 ? "ok" : probe_errno_name(e_)); \
    if ((rc) == 0) ok = 1;                                                                          \
    else if (first_err == 0) first_err = e_;                                                        \
  } while (0)

  errno = 0;
  int nice = getpriority(PRIO_PROCESS, (id_t)pid);
  /* ESRCH: the pid is not in this pid namespace (a supervised job's own). */
  if (errno == ESRCH) blocked(ESRCH, "getpriority(%ld): no such process in this pid namespace", pid);
  if (errno == 0) {
    int rc = setpriority(PRIO_PROCESS, (id_t)pid, nice);
    NOTE("setpriority", rc);
  }
  cpu_set_t set;
  if (sched_getaffinity((pid_t)pid, sizeof set, &set) == 0) {
    int rc = sched_setaffinity((pid_t)pid, sizeof set, &set);
    NOTE("sched_setaffinity", rc);
  }
  int policy = sched_getscheduler((pid_t)pid);
  struct sched_param param;
  if (policy >= 0 && sched_getparam((pid_t)pid, &param) == 0) {
    int rc = sched_setscheduler((pid_t)pid, policy, &param);
    NOTE("sched_setscheduler", rc);
  }
  long io = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, pid);
  if (io >= 0) {
    int rc = (int)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, pid, io);
    NOTE("ioprio_set", rc);
  }
  if (ok) escaped("changed the scheduling of outside pid %ld: %s", pid, seen);
  if (first_err == 0) probe_error("could not read the scheduling of pid %ld", pid);
  blocked(first_err, "outside pid %ld: %s", pid, seen);
}
