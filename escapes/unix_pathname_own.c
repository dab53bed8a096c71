/* The job's own pathname unix socket, in its temporary directory ($TMPDIR,
 * the policy's tmp grant): a server it starts and connects to itself, as
 * tmux, Python's multiprocessing Manager and test suites do. A positive
 * control under ipc "job" from Landlock ABI 9, where RESOLVE_UNIX is granted
 * on no path and a domain still reaches the sockets it bound itself (and
 * only those: unix_pathname_scratch); everywhere else seccomp
 * refuses socket(AF_UNIX) (EPERM), since below ABI 9 nothing could keep a
 * connect by path from a host daemon's socket. Unconfined (no TMPDIR) it
 * uses the run's writable directory. */
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "probe.h"

int main(void) {
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || *dir == '\0') dir = probe_env("OARBANK_PROBE_WRITABLE");
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  /* A pid is not unique across jobs (each has its own pid namespace). */
  if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/own.%d.%ld", dir, (int)getpid(), now.tv_nsec) >=
      (int)sizeof sa.sun_path)
    probe_error("socket path too long under %s", dir);
  int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server < 0) blocked(errno, "socket(AF_UNIX, SOCK_STREAM)");
  if (bind(server, (struct sockaddr *)&sa, sizeof sa) != 0) blocked(errno, "bind %s", sa.sun_path);
  if (listen(server, 1) != 0) {
    int err = errno;
    unlink(sa.sun_path);
    blocked(err, "listen %s", sa.sun_path);
  }
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (client < 0) {
    int err = errno;
    unlink(sa.sun_path);
    blocked(err, "the second socket(AF_UNIX)");
  }
  int rc = connect(client, (struct sockaddr *)&sa, sizeof sa);
  int err = errno;
  unlink(sa.sun_path);
  if (rc != 0) blocked(err, "connect %s", sa.sun_path);
  escaped("the job's own server at %s took its connection", sa.sun_path);
}
