/* System V IPC to a host process: a message queue of the harness (mode
 * 0666), reached by its id, not by a path, so Landlock never sees it. What
 * stops it: seccomp refuses every System V IPC call (EPERM). */
#include <sys/msg.h>

#include "probe.h"

int main(void) {
  int id = (int)probe_env_long("OARBANK_PROBE_SYSV_MSG_ID");
  struct {
    long type;
    char text[32];
  } msg = {1, PROBE_NAME};
  if (msgsnd(id, &msg, sizeof msg.text, IPC_NOWAIT) != 0) blocked(errno, "msgsnd to the host's queue %d", id);
  escaped("sent a message to the host's System V queue %d", id);
}
