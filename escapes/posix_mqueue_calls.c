/* Every POSIX message queue call: queues are named in the IPC namespace's
 * mqueue filesystem, reached by name or by a queue descriptor, not by a
 * path Landlock sees. The seccomp filter refuses all six calls (EPERM),
 * each a row of its own; here each names no queue (an unlinked name, a bad
 * descriptor), so an unfiltered call answers ENOENT or EBADF. */
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  char buf[64];
  struct timespec ts = {0, 0};
  const struct probe_call calls[] = {
      probe_call("mq_open", syscall(SYS_mq_open, "oarbank-probe-no-such-queue", 0, 0, NULL)),
      probe_call("mq_unlink", syscall(SYS_mq_unlink, "oarbank-probe-no-such-queue")),
      probe_call("mq_timedsend", syscall(SYS_mq_timedsend, -1, buf, 1, 0, &ts)),
      probe_call("mq_timedreceive", syscall(SYS_mq_timedreceive, -1, buf, sizeof buf, NULL, &ts)),
      probe_call("mq_notify", syscall(SYS_mq_notify, -1, NULL)),
      probe_call("mq_getsetattr", syscall(SYS_mq_getsetattr, -1, NULL, NULL)),
  };
  verdict_calls_reached(calls, sizeof calls / sizeof calls[0], EPERM);
}
