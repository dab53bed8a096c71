// The one subprocess routine: what the child gets (its environment, stdin,
// descriptors, identity, directory) and what the caller gets back, and that
// nothing of the child outlives a deadline or a hang-up.
#include "sandbox/common/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sandbox/common/read_file.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

using namespace std::chrono_literals;

CaptureLimits Within(std::chrono::milliseconds limit) {
  CaptureLimits l;
  l.deadline = std::chrono::steady_clock::now() + limit;
  return l;
}

SubprocessSpec Sh(const std::string& script) {
  SubprocessSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = {"PATH=/usr/bin:/bin"};
  return s;
}

TEST(Subprocess, CapturesBothStreamsAndTheExitCode) {
  const CapturedRun r = RunCaptured(Sh("echo out; echo err >&2; exit 3"), Within(10s));
  ASSERT_TRUE(r.started) << r.error;
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.ExitCode(), 3);
  EXPECT_FALSE(r.timed_out);
}

TEST(Subprocess, TheEnvironmentIsExactlyTheOneGiven) {
  setenv("OARBANK_SUBPROCESS_TEST_SECRET", "caller's", 1);
  SubprocessSpec s;
  s.argv = {"/usr/bin/env"};
  s.env = {"ONLY=this"};
  const CapturedRun r = RunCaptured(s, Within(10s));
  unsetenv("OARBANK_SUBPROCESS_TEST_SECRET");
  EXPECT_EQ(r.out, "ONLY=this\n");
}

TEST(Subprocess, EachStreamIsCutAtTheCapAndTheChildStillEnds) {
  CaptureLimits l = Within(10s);
  l.max_bytes = 1000;
  size_t seen = 0;
  l.on_output = [&](int stream, std::string_view chunk) {
    if (stream == 0) seen += chunk.size();
  };
  const CapturedRun r = RunCaptured(Sh("head -c 300000 /dev/zero"), l);
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_EQ(seen, 300000u);  // read and dropped, never left blocking the child
  EXPECT_EQ(r.ExitCode(), 0);
}

TEST(Subprocess, InputReachesStdinAndAChildThatIgnoresItCannotKillTheCaller) {
  SubprocessSpec s = Sh("cat");
  s.input = "line one\nline two\n";
  EXPECT_EQ(RunCaptured(s, Within(10s)).out, "line one\nline two\n");
  // Far more than a socket buffer, to a child that exits without reading:
  // the caller gets EPIPE on its send (MSG_NOSIGNAL), never SIGPIPE.
  SubprocessSpec quits = Sh("exit 0");
  quits.input = std::string(4 << 20, 'x');
  const CapturedRun r = RunCaptured(quits, Within(10s));
  EXPECT_EQ(r.ExitCode(), 0);
  // Without input, stdin is /dev/null.
  EXPECT_EQ(RunCaptured(Sh("wc -c"), Within(10s)).out, "0\n");
}

TEST(Subprocess, TheChildHasOnlyItsStdioAndTheDescriptorsNamed) {
  const int leaked = open("/dev/null", O_RDONLY);  // no close-on-exec, as a careless caller might hold
  ASSERT_GE(leaked, 3);
  const UniqueFd guard(leaked);
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const UniqueFd mine(pair[0]), theirs(pair[1]);
  ASSERT_EQ(write(mine.get(), "through 5\n", 10), 10);
  SubprocessSpec s = Sh("ls /proc/self/fd | sort -n | tr '\\n' ' '; head -n1 <&5");
  s.fds = {{theirs.get(), 5}};
  const CapturedRun r = RunCaptured(s, Within(10s));
  // ls's own directory descriptor is 3.
  EXPECT_EQ(r.out, "0 1 2 3 5 through 5\n") << r.err;
  // A caller that hands its descriptors on on purpose (the battery's world).
  SubprocessSpec keep = Sh("test -e /proc/self/fd/" + std::to_string(leaked) + " && echo kept");
  keep.inherit_fds = true;
  EXPECT_EQ(RunCaptured(keep, Within(10s)).out, "kept\n");
}

TEST(Subprocess, TheDeadlineKillsItsWholeGroup) {
  SubprocessSpec s = Sh("sleep 30 & echo $!; wait");
  s.new_process_group = true;
  const auto start = std::chrono::steady_clock::now();
  const CapturedRun r = RunCaptured(s, Within(300ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(r.timed_out);
  ASSERT_TRUE(WIFSIGNALED(r.wait_status));
  EXPECT_EQ(WTERMSIG(r.wait_status), SIGKILL);
  const pid_t background = std::stoi(r.out);
  // Killed with the group (it may linger as a zombie of init for a moment).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    // Not through iostreams: libstdc++'s filebuf throws when read(2) fails,
    // as it does (ESRCH) on a process that ends mid-read.
    const std::optional<std::string> stat = ReadFileUpTo("/proc/" + std::to_string(background) + "/stat", 4096);
    gone = !stat || stat->find(") Z") != std::string::npos;
    if (!gone) usleep(10000);
  }
  EXPECT_TRUE(gone) << "the background sleep outlived its group";
}

TEST(Subprocess, AChildThatClosesItsOutputsIsStillWaitedForUntilTheDeadline) {
  const CapturedRun r = RunCaptured(Sh("exec >&- 2>&-; sleep 30"), Within(300ms));
  EXPECT_TRUE(r.timed_out);
  const CapturedRun done = RunCaptured(Sh("exec >&- 2>&-; exit 4"), Within(10s));
  EXPECT_FALSE(done.timed_out);
  EXPECT_EQ(done.ExitCode(), 4);
}

TEST(Subprocess, AHangUpEndsItThroughTheCallersEnd) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd watched(pair[0]), peer(pair[1]);
  CaptureLimits l = Within(10s);
  l.hangup_fd = watched.get();
  pid_t ended = -1;
  l.end = [&](pid_t pid) {
    ended = pid;
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  };
  peer.Reset();  // the client went away
  const CapturedRun r = RunCaptured(Sh("sleep 30"), l);
  EXPECT_TRUE(r.hung_up);
  EXPECT_GT(ended, 0);
  ASSERT_TRUE(WIFSIGNALED(r.wait_status));
  EXPECT_EQ(WTERMSIG(r.wait_status), SIGTERM);
  EXPECT_EQ(r.ExitCode(), 128 + SIGTERM);
}

TEST(Subprocess, OutputToFilesADirectoryAndAnIdentity) {
  char dir[] = "/tmp/oarbank-subprocess-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  chmod(dir, 0755);
  const std::string file = std::string(dir) + "/out";
  const UniqueFd out(open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  SubprocessSpec s = Sh("pwd; id -u; id -G");
  s.stdout_fd = out.get();
  s.cwd = dir;
  if (geteuid() == 0) s.uid = 65534;
  const CapturedRun r = RunCaptured(s, Within(10s));
  EXPECT_EQ(r.ExitCode(), 0) << r.err;
  EXPECT_EQ(r.out, "");  // went to the file
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string id = std::to_string(geteuid() == 0 ? 65534 : geteuid());
  EXPECT_EQ(text.substr(0, text.find('\n')), dir);
  if (geteuid() == 0) {
    EXPECT_EQ(text.substr(text.find('\n') + 1), id + "\n" + id + "\n");  // no other group
  }
  std::filesystem::remove_all(dir);
}

TEST(Subprocess, WhatCannotStartIsSaid) {
  SubprocessSpec missing;
  missing.argv = {"/nonexistent/program"};
  const CapturedRun r = RunCaptured(missing, Within(10s));
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.ExitCode(), 127);
  const CapturedRun none = RunCaptured(SubprocessSpec{}, Within(10s));
  EXPECT_FALSE(none.started);
  EXPECT_EQ(none.ExitCode(), -1);
  EXPECT_FALSE(none.error.empty());
}

}  // namespace
}  // namespace oarbank
