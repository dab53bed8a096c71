/* Making a written file's pages executable without mapping them so: map the
 * file PROT_READ (which any grant allows), then mprotect(PROT_EXEC). This is
 * how a loader or JIT that maps first and flips later would run written code,
 * and neither execve nor mmap(PROT_EXEC) is ever called on it. Landlock does
 * not see mprotect; the noexec bind of the writable grants
 * (exec_writable=false) does: a file on a noexec mount is mapped without
 * VM_MAYEXEC, so mprotect answers EACCES. Escaped if the pages become
 * executable. Under exec_writable=true it is a positive control. */
#include <sys/mman.h>

#include "probe.h"

int main(void) {
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  const char *source = access("/bin/true", R_OK) == 0 ? "/bin/true" : "/usr/bin/true";
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());
  probe_copy_file(source, path, 0644);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) probe_error("open %s: %s", path, strerror(errno));
  void *page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  if (page == MAP_FAILED) probe_error("mmap(PROT_READ) %s: %s", path, strerror(errno));
  int rc = mprotect(page, 4096, PROT_READ | PROT_EXEC);
  int err = errno;
  unlink(path);
  if (rc != 0) blocked(err, "mprotect(PROT_EXEC) of %s mapped read-only", path);
  escaped("mprotect made the written file %s executable", path);
}
