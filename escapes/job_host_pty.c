/* A host pseudo-terminal from inside a job: a pty of the host's devpts
 * (its master held by the harness, the peer mode 0666), opened by its path
 * /dev/pts/N. A supervised job has a devpts instance of its own (so that
 * script and editors work), which must not show the host's ptys: there is
 * no /dev/pts/N there (ENOENT). Holding a host
 * terminal is what TIOCSTI and its kin need. Runs under the supervisor (a
 * job_* probe). Nothing is written to the terminal. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *path = probe_env("OARBANK_PROBE_HOST_PTY");
  int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  close(fd);
  escaped("opened the host's terminal %s read-write", path);
}
