/* Another process's memory through /proc/<pid>/mem (a same-uid process
 * outside the cage: the agent, an editor). /proc is in the base system, so
 * only the ptrace access check stands in the way: Landlock denies ptrace
 * access to a process outside the sandbox's domain, the capability check
 * denies it across user namespaces, and the open fails with EACCES. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  long pid = probe_env_long("OARBANK_PROBE_OUTSIDE_PID");
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/mem", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  /* Read one byte of a mapping named in /proc/<pid>/maps, where readable. */
  char maps_path[64];
  snprintf(maps_path, sizeof maps_path, "/proc/%ld/maps", pid);
  FILE *maps = fopen(maps_path, "re");
  unsigned long start = 0;
  if (maps) {
    if (fscanf(maps, "%lx-", &start) != 1) start = 0;
    fclose(maps);
  }
  char byte;
  ssize_t n = start ? pread(fd, &byte, 1, (off_t)start) : -1;
  escaped("opened %s (read at %#lx: %zd)", path, start, n);
}
