// Shared by the tests beside the code: run a piece of the test in a forked
// child (as another uid, confined, or as a supervisor whose state must not
// stay in the test process) and bring back what it says.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace oarbank::testing {

// Everything readable from `fd` until end of file.
inline std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Drops the calling (forked) process to uid and gid `uid`, with no
// supplementary groups; true at once when it already is `uid`.
inline bool BecomeUser(uid_t uid) {
  if (uid == getuid()) return true;
  return setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0;
}

struct ChildRun {
  std::string text;  // what the child wrote (RunInChild: what `body` returned; ExecInChild: its stdout)
  int status = 0;    // waitpid's status
};

// The parent's side: all the child wrote on `read_end`, then its status.
inline ChildRun Collect(pid_t pid, int read_end) {
  ChildRun run;
  run.text = ReadAll(read_end);
  close(read_end);
  waitpid(pid, &run.status, 0);
  return run;
}

// Forks; the child runs `body` and writes the string it returns back to
// the parent, which reads all of it and reaps the child.
inline ChildRun RunInChild(const std::function<std::string()>& body) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) abort();
  const pid_t pid = fork();
  if (pid < 0) abort();
  if (pid == 0) {
    close(pipefd[0]);
    const std::string text = body();
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = write(pipefd[1], text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(pipefd[1]);
  return Collect(pid, pipefd[0]);
}

// Forks; the child, as `uid`, runs `before_exec` (say, to set a variable)
// and execs `argv` with its stdout going back to the parent. Exit 126: the
// uid could not be taken; 127: the exec failed.
inline ChildRun ExecInChild(const std::vector<std::string>& argv, uid_t uid = getuid(),
                            const std::function<void()>& before_exec = nullptr) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) abort();
  const pid_t pid = fork();
  if (pid < 0) abort();
  if (pid == 0) {
    dup2(pipefd[1], 1);  // dup2 clears close-on-exec
    if (!BecomeUser(uid)) _exit(126);
    if (before_exec) before_exec();
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipefd[1]);
  return Collect(pid, pipefd[0]);
}

}  // namespace oarbank::testing
