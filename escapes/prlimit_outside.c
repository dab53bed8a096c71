/* Changing the resource limits of a process outside the cage (the agent,
 * same uid): prlimit(pid, RLIMIT_CPU, 1 s) kills it with SIGXCPU,
 * RLIMIT_NOFILE or RLIMIT_AS starve it, and lowered hard limits stay lowered.
 * The kernel allows prlimit on any process whose uids and gids all match the
 * caller's, with no capability check and no Landlock hook (Landlock scopes
 * signals and abstract unix sockets only). What must stop it: a seccomp rule
 * refusing prlimit64 with a pid other than 0 (glibc's setrlimit passes 0), or
 * a pid namespace that leaves outside pids unnamed.
 * The probe reads the target's RLIMIT_NOFILE and sets it to the same value:
 * the same permission checks as any change, and no effect. */
#include <sys/resource.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  struct rlimit cur;
  if (prlimit((pid_t)pid, RLIMIT_NOFILE, NULL, &cur) != 0) blocked(errno, "prlimit(%ld, RLIMIT_NOFILE) read", pid);
  if (prlimit((pid_t)pid, RLIMIT_NOFILE, &cur, NULL) != 0) blocked(errno, "prlimit(%ld, RLIMIT_NOFILE) set", pid);
  escaped("prlimit set RLIMIT_NOFILE of outside pid %ld (to its own value %llu/%llu)", pid,
          (unsigned long long)cur.rlim_cur, (unsigned long long)cur.rlim_max);
}
