/* Executing code that never touches a mounted filesystem: memfd_create, write
 * this probe's own binary into it, fexecve with a marker argument that makes
 * the copy print `escaped`. Neither Landlock (no path) nor a noexec mount
 * sees it; with exec_writable=false the seccomp filter refuses memfd_create
 * (and execveat with AT_EMPTY_PATH) with EPERM. Under exec_writable=true it
 * is a positive control. */
#include <fcntl.h>
#include <sys/mman.h>

#include "probe.h"

#define MARKER "--oarbank-memfd-copy"
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

extern char **environ;

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], MARKER) == 0) escaped("the memfd copy ran");
  int fd = memfd_create(PROBE_NAME, MFD_CLOEXEC | MFD_EXEC);
  if (fd < 0 && errno == EINVAL) fd = memfd_create(PROBE_NAME, MFD_CLOEXEC); /* kernels before 6.3 */
  if (fd < 0) {
    int err = errno;
    FILE *f = fopen("/proc/sys/vm/memfd_noexec", "re");
    int noexec = 0;
    if (f) {
      if (fscanf(f, "%d", &noexec) != 1) noexec = 0;
      fclose(f);
    }
    if (err == EACCES && noexec == 2) unsupported("vm.memfd_noexec = 2 refuses executable memfds on this host");
    blocked(err, "memfd_create");
  }
  int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0) probe_error("open /proc/self/exe: %s", strerror(errno));
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(fd, buf, (size_t)n) != n) probe_error("write memfd: %s", strerror(errno));
  close(in);
  char *args[] = {(char *)PROBE_NAME, MARKER, NULL};
  fexecve(fd, args, environ);
  blocked(errno, "fexecve(memfd)");
}
