#include "harness/probe_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

namespace oarbank {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "SIG" + std::to_string(sig);
}

ProbeRun SpawnProbe(const std::vector<std::string>& argv, const std::vector<std::string>& env, uid_t uid,
                    int timeout_ms) {
  ProbeRun run;
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    run.detail = std::string("pipe: ") + strerror(errno);
    return run;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    run.detail = std::string("pipe: ") + strerror(errno);
    close(out[0]);
    close(out[1]);
    return run;
  }
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const auto start = std::chrono::steady_clock::now();
  // vfork: no copy of the harness's address space per run (a fork costs
  // most of a probe's run under QEMU's TCG). The child shares the parent's
  // memory until it execs, so it makes raw system calls only: glibc's
  // setgroups/setres[ug]id would signal the parent's other threads to
  // change theirs too.
  const pid_t pid = vfork();
  if (pid == 0) {
    setpgid(0, 0);
    if (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 || dup2(devnull, 0) < 0) _exit(125);
    if (uid != 0 && (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setresgid, uid, uid, uid) != 0 ||
                     syscall(SYS_setresuid, uid, uid, uid) != 0))
      _exit(125);
    execve(args[0], args.data(), envp.data());
    _exit(126);
  }
  if (devnull >= 0) close(devnull);
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    run.detail = std::string("vfork: ") + strerror(errno);
    return run;
  }
  close(out[1]);
  close(err[1]);
  std::string o, e;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    const int left = timeout_ms - static_cast<int>(elapsed.count());
    if (left <= 0 || poll(fds, 2, left) == 0) {
      run.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    for (auto& p : fds) {
      if (p.fd < 0 || !p.revents) continue;
      char buf[4096];
      const ssize_t n = read(p.fd, buf, sizeof buf);
      if (n <= 0) {
        close(p.fd);
        p.fd = -1;
        --open_fds;
        continue;
      }
      (p.fd == out[0] ? o : e).append(buf, static_cast<size_t>(n));
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) close(p.fd);
  int status = 0;
  waitpid(pid, &status, 0);
  kill(-pid, SIGKILL);  // nothing of the run stays behind in its group
  run.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (WIFSIGNALED(status))
    run.signal = WTERMSIG(status);
  else
    run.exit_code = WEXITSTATUS(status);
  run.stderr_text = e.substr(0, 2000);
  run.stdout_text = o.substr(0, 1 << 20);
  // The verdict: the last line of stdout that parses as one.
  size_t pos = 0;
  while (pos < o.size()) {
    size_t end = o.find('\n', pos);
    if (end == std::string::npos) end = o.size();
    const auto j = nlohmann::json::parse(o.substr(pos, end - pos), nullptr, false);
    if (j.is_object() && j.contains("verdict") && j["verdict"].is_string()) {
      run.verdict = j["verdict"];
      run.err = j.value("errno", "");
      run.detail = j.value("detail", "");
    }
    pos = end + 1;
  }
  return run;
}

}  // namespace oarbank
