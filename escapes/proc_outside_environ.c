/* Another process's environment through /proc/<pid>/environ (a same-uid
 * process outside the cage holds tokens there). Opening it takes a ptrace
 * read check: Landlock denies ptrace access outside the sandbox's domain
 * (and the capability check across user namespaces): EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) blocked(errno, "read %s", path);
  escaped("read %zd bytes of %s", n, path);
}
