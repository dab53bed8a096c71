/* Each namespace clone(2) can make, alone and together with a new user
 * namespace (which gives the capabilities the others need, so a job with
 * none makes them anyway): a new mount, cgroup, UTS, IPC, pid or network
 * namespace is kernel surface no job needs (the netfilter and cgroup bugs
 * reachable from one). The seccomp filter refuses each flag with a row of
 * its own (EPERM). A child that is made exits at once. */
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "probe.h"

static long try_clone(unsigned long flags) {
  long pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
  if (pid == 0) _exit(0);
  if (pid > 0) waitpid((pid_t)pid, NULL, 0);
  return pid;
}

int main(void) {
  static const struct {
    const char *name;
    unsigned long flag;
  } flags[] = {{"NEWNS", CLONE_NEWNS},   {"NEWCGROUP", CLONE_NEWCGROUP}, {"NEWUTS", CLONE_NEWUTS},
               {"NEWIPC", CLONE_NEWIPC}, {"NEWPID", CLONE_NEWPID},       {"NEWNET", CLONE_NEWNET}};
  static char names[12][40];
  struct probe_call calls[12];
  size_t n = 0;
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; ++i) {
    snprintf(names[n], sizeof names[n], "%s", flags[i].name);
    calls[n] = probe_call(names[n], try_clone(flags[i].flag));
    ++n;
    snprintf(names[n], sizeof names[n], "NEWUSER|%s", flags[i].name);
    calls[n] = probe_call(names[n], try_clone(flags[i].flag | CLONE_NEWUSER));
    ++n;
  }
  /* Without the filter, a process without capabilities gets EPERM from the
   * kernel for the flags alone: only a call that succeeded reached it. */
  int made = 0;
  for (size_t i = 0; i < n; ++i) made |= calls[i].ret > 0;
  if (!made) {
    char seen[1024] = "";
    for (size_t i = 0; i < n; ++i) {
      size_t len = strlen(seen);
      snprintf(seen + len, sizeof seen - len, "%s%s=%s", len ? " " : "", calls[i].what, probe_errno_name(calls[i].err));
    }
    blocked(calls[0].err, "%s", seen);
  }
  verdict_calls_reached(calls, n, EPERM);
}
