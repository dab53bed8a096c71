/* A daemon that outlives the job: double fork + setsid, stdio on /dev/null,
 * so it is neither the job's child nor in its session. It writes its pid to
 * OARBANK_PROBE_PIDFILE, holds a write lock (fcntl) on that file for as long
 * as it lives, and sleeps 5 s. The probe says `escaped` once the daemon
 * runs; whether it survived the job the harness checks from outside: the
 * lock's holder (F_GETLK) is named in the harness's own pid namespace,
 * whichever namespace the daemon ran in. No kernel layer of sandbox-exec
 * stops this (the cage outlives the launcher in the daemon); the supervisor
 * does, by killing the job's whole pid namespace and cgroup leaf at its end,
 * so the battery runs this probe under `oarbank-agent run` (expect
 * "contained"). */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "probe.h"

int main(void) {
  const char *pidfile = probe_env("OARBANK_PROBE_PIDFILE");
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) probe_error("pipe: %s", strerror(errno));
  fflush(stdout);
  pid_t first = fork();
  if (first < 0) probe_error("fork: %s", strerror(errno));
  if (first == 0) {
    close(pipefd[0]);
    if (setsid() < 0) _exit(2);
    pid_t second = fork();
    if (second < 0) _exit(3);
    if (second > 0) _exit(0);
    /* The daemon. */
    signal(SIGHUP, SIG_IGN);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
      if (devnull > 2) close(devnull);
    }
    int status = 0;
    unlink(pidfile); /* a stale one may belong to another uid */
    int fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd < 0) {
      status = errno;
    } else {
      char buf[32];
      int len = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
      if (write(fd, buf, (size_t)len) != len) status = errno;
      else if (fcntl(fd, F_SETLK, &lock) != 0) status = errno;
      /* fd stays open: the lock lasts as long as the daemon. */
    }
    char report[64];
    int len = snprintf(report, sizeof report, "%d %d", (int)getpid(), status);
    write(pipefd[1], report, (size_t)len);
    close(pipefd[1]);
    if (status == 0) sleep(5);
    _exit(0);
  }
  close(pipefd[1]);
  int st;
  waitpid(first, &st, 0);
  char report[64] = "";
  ssize_t n = read(pipefd[0], report, sizeof report - 1);
  close(pipefd[0]);
  int daemon_pid = 0, err = 0;
  if (n <= 0 || sscanf(report, "%d %d", &daemon_pid, &err) != 2)
    probe_error("the daemon did not start (first child status %d)", st);
  if (err != 0) probe_error("the daemon could not write %s: %s", pidfile, strerror(err));
  escaped("daemon pid %d (setsid, double fork) started and sleeps 5 s; pid in %s", daemon_pid, pidfile);
}
