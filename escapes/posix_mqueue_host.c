/* A POSIX message queue of the harness (mode 0666), opened by name in the
 * host's IPC namespace: the mqueue filesystem need not be mounted, so no
 * Landlock path rule applies. What stops it: seccomp refuses mq_open (EPERM). */
#include <fcntl.h>
#include <mqueue.h>

#include "probe.h"

int main(void) {
  const char *name = probe_env("OARBANK_PROBE_MQUEUE");
  mqd_t q = mq_open(name, O_WRONLY | O_NONBLOCK);
  if (q == (mqd_t)-1) blocked(errno, "mq_open %s", name);
  if (mq_send(q, PROBE_NAME, sizeof PROBE_NAME, 0) != 0) blocked(errno, "mq_send %s", name);
  escaped("sent a message to the host's POSIX queue %s", name);
}
