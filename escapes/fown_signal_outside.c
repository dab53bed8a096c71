/* Signalling a process outside the cage without kill(): F_SETOWN makes it
 * the owner of a pipe, O_ASYNC arms SIGIO, and a write to the pipe makes the
 * kernel send it the signal. Landlock's signal scoping (ABI 6) covers this
 * path too (file_send_sigiotask), but a refused SIGIO is dropped without any
 * call failing, so the probe says "sent" and the harness judges by its
 * signal sink, a process of the probe's uid outside the cage that keeps
 * every signal pending: escaped if SIGIO is pending there, blocked if not. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_SIGNAL_SINK_PID");
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) probe_error("pipe: %s", strerror(errno));
  if (fcntl(p[0], F_SETOWN, (int)pid) != 0) blocked(errno, "fcntl(F_SETOWN, %ld)", pid);
  int flags = fcntl(p[0], F_GETFL);
  if (flags < 0 || fcntl(p[0], F_SETFL, flags | O_ASYNC) != 0) blocked(errno, "fcntl(F_SETFL, O_ASYNC)");
  if (write(p[1], "x", 1) != 1) probe_error("write to the pipe: %s", strerror(errno));
  sent("SIGIO for input on a pipe owned (F_SETOWN) by pid %ld", pid);
}
