/* A host daemon's pathname unix socket inside the work grant: git's
 * fsmonitor keeps one in a worktree's .git, and a job that can write the
 * worktree must still not reach it. connect() to
 * OARBANK_PROBE_UNIX_SOCKET_WORK (the harness listens there and records
 * each connection). What stops it: under ipc "job" from Landlock ABI 9,
 * RESOLVE_UNIX is granted on no path (EACCES; a socket the job binds
 * itself, in its own Landlock domain, stays reachable anywhere, which is
 * why the harness's is the one tried); with a broker, RESOLVE_UNIX on the
 * broker's socket alone (EACCES); everywhere else seccomp refuses
 * socket(AF_UNIX) (EPERM). */
#include <sys/socket.h>
#include <sys/un.h>

#include "probe.h"

int main(void) {
  struct sockaddr_un sa = probe_unix_address("OARBANK_PROBE_UNIX_SOCKET_WORK");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) blocked(errno, "socket(AF_UNIX, SOCK_STREAM)");
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) blocked(errno, "connect %s", sa.sun_path);
  (void)!write(fd, PROBE_NAME "\n", sizeof PROBE_NAME);
  escaped("connected to the host daemon's socket %s inside the work grant", sa.sun_path);
}
