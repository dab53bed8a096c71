/* Executing a file the module wrote: a copy of this probe's own binary in a
 * writable grant, chmod 755, execve'd with a marker argument that makes the
 * copy print `escaped`. With exec_writable=false the writable grants are
 * bind-mounted noexec (execve answers EACCES) and Landlock grants them no
 * EXECUTE (EACCES too). Under exec_writable=true it is a positive control. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

#define MARKER "--oarbank-written-copy"

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], MARKER) == 0) {
    unlink(argv[2]);
    escaped("the written copy %s ran", argv[2]);
  }
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());
  probe_copy_file("/proc/self/exe", path, 0755);
  char *args[] = {path, MARKER, path, NULL};
  execv(path, args);
  int err = errno;
  unlink(path);
  blocked(err, "execve %s", path);
}
