/* Leaving the job's cgroup (and with it the job's memory/CPU limits and the
 * supervisor's cgroup.kill) by writing its own pid into another cgroup's
 * cgroup.procs, writable by the probe's uid. Landlock grants nothing under
 * /sys/fs/cgroup: the open is refused with EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *procs = probe_env("OARBANK_PROBE_CGROUP_PROCS");
  int fd = open(procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", procs);
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (write(fd, pid, (size_t)len) != len) blocked(errno, "write own pid into %s", procs);
  escaped("moved pid %d into %s", (int)getpid(), procs);
}
