// oarbank-container-init: the first process of every container the broker
// starts (podman --init --init-path), which ties the container's life to the
// broker's by a descriptor the kernel holds.
//
//   /run/podman-init -- COMMAND [ARG...]     (podman's calling convention)
//
// Descriptor 3 (podman --preserve-fds=1) is the read end of a pipe whose
// only write end the broker holds (close-on-exec, never passed on). When
// the broker dies, however it dies, the kernel closes that end and this
// process reads end of file: it kills every process of the container and
// exits, and as the container's pid 1 its exit ends the pid namespace, so
// nothing of the container can outlive it. The broker's watchdog and conmon's
// timeout stay behind it, but neither is needed for a dead broker any more.
//
// Otherwise it is a plain init: it runs COMMAND as its child (without
// descriptor 3), passes on the signals podman sends (TERM, INT, HUP, QUIT,
// USR1, USR2, WINCH), reaps every orphan, and exits with COMMAND's status
// (128 + the signal that killed it). It is not dumpable, so nothing in the
// container can read or trace it. Without a pipe on descriptor 3 it runs
// nothing, nor as any process but a pid namespace's first: exit 70 and one
// line. A program of its own, linked statically,
// because it runs inside whatever image the module asked for.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr int kLifelineFd = 3;
constexpr int kExitUsage = 70;
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

int Fail(const char* what, int err) {
  fprintf(stderr, "oarbank-container-init: %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
  return kExitUsage;
}

// Ends the container: every process this one can signal, then itself.
[[noreturn]] void EndContainer(int code) {
  kill(-1, SIGKILL);
  _exit(code);
}

int StatusCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || strcmp(argv[1], "--") != 0) return Fail("usage: oarbank-container-init -- COMMAND [ARG...]", 0);
  // Its end signals every process it may: only ever inside a pid namespace.
  if (getpid() != 1) return Fail("not the first process of a pid namespace (a container's init)", 0);
  struct stat st;
  if (fstat(kLifelineFd, &st) != 0) return Fail("descriptor 3 (the broker's lifeline)", errno);
  if (!S_ISFIFO(st.st_mode)) return Fail("descriptor 3 is not the broker's lifeline (a pipe)", 0);
  if (fcntl(kLifelineFd, F_SETFD, FD_CLOEXEC) != 0) return Fail("descriptor 3: close-on-exec", errno);
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Fail("not dumpable", errno);

  sigset_t all, old;
  sigfillset(&all);
  if (sigprocmask(SIG_BLOCK, &all, &old) != 0) return Fail("block signals", errno);
  sigset_t watched;
  sigemptyset(&watched);
  sigaddset(&watched, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&watched, sig);
  const int signals = signalfd(-1, &watched, SFD_CLOEXEC);
  if (signals < 0) return Fail("signalfd", errno);

  const pid_t child = fork();
  if (child < 0) return Fail("fork", errno);
  if (child == 0) {
    close(signals);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execvp(argv[2], argv + 2);
    const int err = errno;
    fprintf(stderr, "oarbank-container-init: exec %s: %s\n", argv[2], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }

  pollfd fds[2] = {{kLifelineFd, POLLIN, 0}, {signals, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      EndContainer(kExitUsage);
    }
    if (fds[0].revents != 0) {
      char buf[64];
      const ssize_t n = read(kLifelineFd, buf, sizeof buf);
      // End of file: the broker is gone. Nothing else ever writes there;
      // an error reading it is taken the same way.
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) EndContainer(137);
    }
    if (fds[1].revents == 0) continue;
    signalfd_siginfo info;
    if (read(signals, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    if (info.ssi_signo != SIGCHLD) {
      kill(child, static_cast<int>(info.ssi_signo));
      continue;
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid == child) EndContainer(StatusCode(status));
    }
  }
}
