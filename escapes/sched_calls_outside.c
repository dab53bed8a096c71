/* Scheduling another process or group: setpriority and ioprio_set on a
 * process group or a user (every process of the uid, the host's too), and
 * sched_setscheduler, sched_setparam and sched_setattr on a process outside
 * the cage (same uid): starving or pinning what the job does not own. The
 * seccomp filter refuses each with a row of its own (EPERM); a job may
 * change only itself. Nothing is changed even unconfined: the group calls
 * name the probe's own new process group, the user call a uid that has no
 * process (ESRCH), and each call on the process outside sets what is
 * already there (its policy and parameters). */
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "probe.h"

#define PROBE_IOPRIO_WHO_PGRP 2
#define PROBE_UNUSED_UID 2147480000u /* no process has it */

struct probe_sched_attr {
  unsigned size, policy;
  unsigned long long flags;
  int nice;
  unsigned priority;
  unsigned long long runtime, deadline, period;
  unsigned util_min, util_max;
};

int main(void) {
  const pid_t outside = (pid_t)probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  /* A session leader (as under run) already leads a group of its own. */
  if (setpgid(0, 0) != 0 && getpgrp() != getpid()) probe_error("setpgid: %s", strerror(errno));
  errno = 0;
  const int pgrp_nice = getpriority(PRIO_PGRP, 0);
  const long ioprio = syscall(SYS_ioprio_get, PROBE_IOPRIO_WHO_PGRP, 0);
  struct sched_param param = {0};
  const int policy = sched_getscheduler(outside);
  sched_getparam(outside, &param);
  struct probe_sched_attr attr = {0};
  attr.size = sizeof attr;
  syscall(SYS_sched_getattr, outside, &attr, sizeof attr, 0);
  const struct probe_call calls[] = {
      probe_call("setpriority(PRIO_PGRP)", setpriority(PRIO_PGRP, 0, pgrp_nice)),
      probe_call("setpriority(PRIO_USER)", setpriority(PRIO_USER, PROBE_UNUSED_UID, 0)),
      probe_call("ioprio_set(PGRP)", syscall(SYS_ioprio_set, PROBE_IOPRIO_WHO_PGRP, 0, ioprio < 0 ? 0 : ioprio)),
      probe_call("sched_setscheduler", syscall(SYS_sched_setscheduler, outside, policy < 0 ? SCHED_OTHER : policy,
                                               &param)),
      probe_call("sched_setparam", syscall(SYS_sched_setparam, outside, &param)),
      probe_call("sched_setattr", syscall(SYS_sched_setattr, outside, &attr, 0)),
  };
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EPERM);
}
