/* A pathname unix socket the job did not bind, inside the directories it
 * may write most freely: its temporary grant ($TMPDIR, the cage's scratch)
 * and its data grant, which two jobs may share. A host daemon, or another
 * job, listens there; the job must not reach it. connect() to
 * OARBANK_PROBE_UNIX_SOCKET_TMP, then to OARBANK_PROBE_UNIX_SOCKET_DATA (the
 * harness listens on both and records each connection). What stops it:
 * under ipc "job" from Landlock ABI 9, RESOLVE_UNIX is handled with no path
 * granted it, so only sockets the job's own processes bound answer (EACCES);
 * with a broker, RESOLVE_UNIX on the broker's socket alone (EACCES);
 * everywhere else seccomp refuses socket(AF_UNIX) (EPERM). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  static const char *const vars[] = {"OARBANK_PROBE_UNIX_SOCKET_TMP", "OARBANK_PROBE_UNIX_SOCKET_DATA"};
  int err[2] = {0, 0};
  char reached[256] = "";
  /* Both are tried whatever the first gave, so the unconfined run shows
   * each listener reachable, not only the first. */
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    struct sockaddr_un sa = probe_unix_address(vars[i]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) blocked(errno, "socket(AF_UNIX, SOCK_STREAM)");
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
      (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
      snprintf(reached + strlen(reached), sizeof reached - strlen(reached), "%s%s", *reached ? " and " : "",
               i == 0 ? "the tmp grant's" : "the data grant's");
    } else {
      err[i] = errno;
    }
    close(fd);
  }
  if (*reached) escaped("connected to sockets the job did not bind: %s", reached);
  /* Refused two different ways: no one errno to report, so none (the
   * expectation names one, and the cell says the answers changed). */
  blocked(err[0] == err[1] ? err[0] : 0, "connect to the host's sockets in the tmp grant (%s) and the data grant (%s)",
          strerror(err[0]), strerror(err[1]));
}
