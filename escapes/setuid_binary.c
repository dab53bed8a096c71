/* A setuid-root binary the module can reach (here a copy of
 * probe_capeff_helper in the bundle, mode 4755 root): exec would hand the
 * module root's capabilities. no_new_privs makes exec ignore the setuid bit
 * (and root's own capabilities are dropped with SECBIT_NOROOT locked), so the
 * helper reports CapEff 0: blocked, no errno. Escaped if the helper runs
 * with any effective capability.
 *
 * The helper is started as uid 65534 whenever the probe may become it (the
 * harness's unconfined run is root): a root caller has every capability
 * with or without the setuid bit, so only an unprivileged caller proves the
 * bit works. Confined, the launcher has dropped CAP_SETUID and the helper
 * starts as the probe's own uid, root included. */
#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>

#include "probe.h"

int main(void) {
  const char *helper = probe_env("OARBANK_PROBE_SETUID_HELPER");
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) probe_error("pipe: %s", strerror(errno));
  pid_t child = fork();
  if (child < 0) probe_error("fork: %s", strerror(errno));
  if (child == 0) {
    dup2(pipefd[1], 1);
    /* setgroups succeeds only while CAP_SETGID is there (unconfined): from
     * then on, a helper that would still start as root proves nothing. */
    if (getuid() == 0 && setgroups(0, NULL) == 0 &&
        (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) {
      dprintf(1, "DROPFAIL %d\n", errno);
      _exit(125);
    }
    execl(helper, helper, (char *)NULL);
    dprintf(1, "EXECFAIL %d\n", errno);
    _exit(126);
  }
  close(pipefd[1]);
  char out[512];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof out - 1 && (n = read(pipefd[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)n;
  out[len] = '\0';
  close(pipefd[0]);
  int status;
  waitpid(child, &status, 0);
  int exec_err;
  if (sscanf(out, "DROPFAIL %d", &exec_err) == 1) probe_error("could not become uid 65534: %s", strerror(exec_err));
  if (sscanf(out, "EXECFAIL %d", &exec_err) == 1) blocked(exec_err, "execve %s", helper);
  const char *cap = strstr(out, "CapEff:");
  if (cap == NULL) probe_error("%s printed no CapEff line: %.200s", helper, out);
  unsigned long long eff = strtoull(cap + 7, NULL, 16);
  if (eff != 0) escaped("%s ran with CapEff %016llx", helper, eff);
  blocked(0, "%s ran with CapEff 0 (no_new_privs ignored the setuid bit)", helper);
}
