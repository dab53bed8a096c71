#include "sandbox/supervise/job_trace.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>

extern char** environ;

namespace oarbank::cage {
namespace {

using Clock = std::chrono::steady_clock;

// TracerPid of /proc/<pid>/status; -1 when unreadable.
pid_t TracerOf(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("TracerPid:", 0) == 0) return static_cast<pid_t>(std::strtol(line.c_str() + 10, nullptr, 10));
  return -1;
}

// The last line the tracer wrote on its stderr (the caller's file).
std::string TailOf(int fd) {
  char buf[4096];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const auto nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  return text.substr(0, 300);
}

}  // namespace

JobTracer::~JobTracer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

Expected<JobTracer> JobTracer::Attach(const JobTrace& trace, pid_t keeper, std::chrono::milliseconds timeout) {
  if (trace.command.empty() || trace.log_fd < 0 || trace.err_fd < 0) return Error{"explain", "no tracer"};
  std::vector<std::string> args = trace.command;
  args.push_back("-p");
  args.push_back(std::to_string(keeper));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, trace.err_fd, STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, trace.log_fd, kTracerLogFd);
  // A session of its own: the caller's ^C or ^Z reaches the job through
  // the supervisor, never the tracer alone.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  JobTracer tracer;
  const int err = posix_spawn(&tracer.pid_, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    tracer.pid_ = -1;
    return Error{"explain", std::string("cannot start ") + argv[0] + ": " + strerror(err)};
  }
  // The log is bounded on disk: past kMaxTracerLog the tracer gets SIGXFSZ
  // and ends, and the job with it.
  const rlimit cap = {kMaxTracerLog, kMaxTracerLog};
  if (prlimit(tracer.pid_, RLIMIT_FSIZE, &cap, nullptr) != 0)
    return Error{"explain", std::string("prlimit RLIMIT_FSIZE on the tracer: ") + strerror(errno)};
  tracer.pidfd_.Reset(static_cast<int>(syscall(SYS_pidfd_open, tracer.pid_, 0)));
  if (!tracer.pidfd_.valid()) return Error{"explain", std::string("pidfd_open: ") + strerror(errno)};
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (TracerOf(keeper) == tracer.pid_) return tracer;
    int status = 0;
    if (waitpid(tracer.pid_, &status, WNOHANG) == tracer.pid_) {
      tracer.pid_ = -1;
      const std::string said = TailOf(trace.err_fd);
      return Error{"explain", std::string("the tracer did not attach to the job") + (said.empty() ? "" : ": " + said)};
    }
    if (Clock::now() >= deadline) return Error{"explain", "the tracer did not attach to the job within its deadline"};
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string JobTracer::Finish(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return "";
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::string why;
  if (got == 0) {
    kill(pid_, SIGKILL);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    why = "the tracer did not end with the job and was killed: its logs may be cut";
  } else if (got == pid_ && WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) {
    why = "the tracer's log reached its cap of " + std::to_string(kMaxTracerLog >> 20) + " MiB";
  } else if (got == pid_ && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    why = "the tracer ended abnormally: its logs may be cut";
  }
  pid_ = -1;
  return why;
}

}  // namespace oarbank::cage
