/* Signalling a process outside the cage (killing the agent, or probing for
 * it). kill(pid, 0) takes every permission check a real signal takes and
 * delivers nothing. Landlock's signal scoping (ABI 6, ipc.scoping) refuses
 * signals to processes outside the sandbox's domain with EPERM. */
#include <signal.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  if (kill((pid_t)pid, 0) == 0) escaped("kill(%ld, 0) allowed: a real signal would be delivered", pid);
  blocked(errno, "kill(%ld, 0)", pid);
}
