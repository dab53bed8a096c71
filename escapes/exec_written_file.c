/* Executing a file the module wrote: a copy of this probe's own binary in
 * each writable grant the policy has (work, data, tmp, state: the run's
 * writable subdirectory first, then each grant's root), chmod 755, execve'd
 * with a marker argument that makes the copy print `escaped`. With
 * exec_writable=false the writable grants are bind-mounted noexec (execve
 * answers EACCES) and Landlock grants them no EXECUTE (EACCES too): every
 * grant is tried, so a grant whose rules alone gave EXECUTE is seen. Under
 * exec_writable=true it is a positive control. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

#define MARKER "--oarbank-written-copy"

/* Runs the copy at dir/PROBE.PID (it never returns when it ran); the errno. */
static int try_exec(const char *dir, char *path, size_t size) {
  snprintf(path, size, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  probe_copy_file("/proc/self/exe", path, 0755);
  char *args[] = {path, MARKER, path, NULL};
  execv(path, args);
  int err = errno;
  unlink(path);
  return err;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], MARKER) == 0) {
    unlink(argv[2]);
    escaped("the written copy %s ran", argv[2]);
  }
  char path[4096], tried[8192] = "";
  int first = try_exec(probe_env("OARBANK_PROBE_WRITABLE"), path, sizeof path);
  strcpy(tried, path);
  char grants[4096];
  snprintf(grants, sizeof grants, "%s", probe_env("OARBANK_PROBE_WRITABLE_GRANTS"));
  for (char *save = NULL, *dir = strtok_r(grants, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
    const char *name = probe_errno_name(try_exec(dir, path, sizeof path));
    if (strlen(tried) + strlen(path) + strlen(name) + 5 < sizeof tried) {
      strcat(tried, ", ");
      strcat(tried, path);
      strcat(tried, ": ");
      strcat(tried, name);
    }
  }
  blocked(first, "execve %s", tried);
}
