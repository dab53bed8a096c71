/* Reading the command line of a process outside the cage: passwords and
 * tokens passed as arguments (mysql -pSECRET, curl -u user:pass) are in
 * /proc/<pid>/cmdline, which every user may read, with no ptrace check that
 * Landlock's scope could refuse. sandbox-exec alone shares the host's pid
 * namespace and grants /proc read (tools need /proc/self, /proc/cpuinfo),
 * so it shows every process: a known gap. `run` closes it: the job's /proc
 * is a fresh one of its own pid namespace, where the harness's process does
 * not exist (harness/test_cli.py checks that). */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  int err = errno;
  close(fd);
  if (n > 0) {
    buf[n] = '\0';
    escaped("read %zd bytes of %s: %s ...", n, path, buf);
  }
  if (n == 0) probe_error("%s is empty: the outside process has no command line to show", path);
  blocked(err, "read %s", path);
}
