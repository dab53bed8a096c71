/* Executing a written file through the dynamic loader: `ld.so ./file` is an
 * execve of ld.so (in the base system), which then maps the written file
 * itself. Landlock's EXECUTE right is checked on execve only, so it cannot
 * stop this; the noexec bind of the writable grants (exec_writable=false)
 * does: mmap(PROT_EXEC) of a file on a noexec mount fails with EPERM and
 * ld.so exits 127 ("failed to map segment"). The probe copies /bin/true (a
 * dynamic executable) into the writable grant and runs the loader on it:
 * escaped if it exits 0. The errno is the one ld.so reports, or the one the
 * probe's own mmap(PROT_READ|PROT_EXEC) of the copy meets. Under
 * exec_writable=true it is a positive control. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "probe.h"

/* The loader's path is fixed by each architecture's ABI. */
#if defined(__x86_64__)
#define LDSO "/lib64/ld-linux-x86-64.so.2"
#elif defined(__aarch64__)
#define LDSO "/lib/ld-linux-aarch64.so.1"
#else
#error "exec_written_ldso: no dynamic loader path for this architecture"
#endif

int main(void) {
  const char *writable = probe_env("OARBANK_PROBE_WRITABLE");
  if (access(LDSO, F_OK) != 0) unsupported("no dynamic loader at %s", LDSO);
  const char *source = access("/bin/true", R_OK) == 0 ? "/bin/true" : "/usr/bin/true";
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", writable, PROBE_NAME, (int)getpid());
  /* Mode 0644: the loader needs only read, which is the point. */
  probe_copy_file(source, path, 0644);

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) probe_error("pipe: %s", strerror(errno));
  pid_t child = fork();
  if (child < 0) probe_error("fork: %s", strerror(errno));
  if (child == 0) {
    dup2(pipefd[1], 2);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);
    execl(LDSO, LDSO, path, (char *)NULL);
    dprintf(2, "execl %s: errno %d\n", LDSO, errno);
    _exit(126);
  }
  close(pipefd[1]);
  char out[1024];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof out - 1 && (n = read(pipefd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)n;
  out[len] = '\0';
  if (len && out[len - 1] == '\n') out[len - 1] = '\0';
  close(pipefd[0]);
  int status = 0;
  waitpid(child, &status, 0);

  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    unlink(path);
    escaped("%s %s (a written copy of %s) ran and exited 0", LDSO, path, source);
  }
  /* Which errno stopped it: the one ld.so names, else the probe's own
   * executable mapping of the copy. */
  int err = 0;
  static const int kCandidates[] = {EPERM, EACCES};
  for (size_t i = 0; i < sizeof kCandidates / sizeof kCandidates[0]; ++i)
    if (strstr(out, strerror(kCandidates[i]))) err = kCandidates[i];
  if (err == 0) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      void *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) err = errno;
      else munmap(p, 4096);
      close(fd);
    }
  }
  unlink(path);
  blocked(err, "%s %s: %s %d: %s", LDSO, path, WIFEXITED(status) ? "exit" : "signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
}
