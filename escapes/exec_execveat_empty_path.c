/* Executing an already-open written file: copy this probe's binary into a
 * writable grant, open it, execveat(fd, "", argv, envp, AT_EMPTY_PATH) with a
 * marker argument that makes the copy print `escaped`. With
 * exec_writable=false the seccomp filter refuses execveat with AT_EMPTY_PATH
 * (EPERM); the noexec bind would answer EACCES behind it. Under
 * exec_writable=true it is a positive control. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "probe.h"

#define MARKER "--oarbank-execveat-copy"

extern char **environ;

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], MARKER) == 0) {
    unlink(argv[2]);
    escaped("execveat(fd of %s, \"\", AT_EMPTY_PATH) ran the written copy", argv[2]);
  }
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());
  int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0) probe_error("open /proc/self/exe: %s", strerror(errno));
  int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  if (out < 0) probe_error("create %s in the writable grant: %s", path, strerror(errno));
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) probe_error("write %s: %s", path, strerror(errno));
  fchmod(out, 0755);
  close(in);
  close(out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) probe_error("reopen %s: %s", path, strerror(errno));
  char *args[] = {path, MARKER, path, NULL};
  syscall(SYS_execveat, fd, "", args, environ, AT_EMPTY_PATH);
  int err = errno;
  unlink(path);
  blocked(err, "execveat(fd of %s, \"\", AT_EMPTY_PATH)", path);
}
