// The module's output and terminal under the supervisor: the cap, the
// caller's spool file, text that is not UTF-8, streaming and the job's pty;
// as root and as uid 65534 (supervisor_test.h).
#include "sandbox/supervise/supervisor_test.h"

namespace oarbank {
namespace {

TEST_P(SupervisorTest, OutputBeyondTheCapIsCutAndMarked) {
  cage::RunOptions o = UnprovenOptions();
  o.stdout_max = 1000;
  o.stderr_max = 10;
  const auto r = Run({"/bin/sh", "-c", "head -c 3000000 /dev/zero; echo 0123456789abcdef >&2"}, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.exit_code, 0);  // drained, so the module never blocked on a full pipe
  EXPECT_EQ(r.stdout_text, std::string(1000, '\0'));
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stdout_dropped, 3000000u - 1000u);
  EXPECT_EQ(r.stderr_text, "0123456789");
  EXPECT_TRUE(r.stderr_truncated);
  EXPECT_EQ(r.stderr_dropped, 7u);
}

// A caller's spool file takes every kept byte; memory keeps a window.
TEST_P(SupervisorTest, OutputBeyondTheWindowGoesToTheCallersSpoolFile) {
  const std::string spool = tree_.Path("stdout.spool");
  const int fd = open(spool.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << strerror(errno);
  cage::RunOptions o;
  o.stdout_max = 3 << 20;
  o.stdout_fd = fd;
  const auto r = Run({"/bin/sh", "-c", "head -c 4000000 /dev/zero | tr '\\0' y"}, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.stdout_spooled);
  EXPECT_EQ(r.stdout_bytes, 3u << 20);
  EXPECT_EQ(r.stdout_dropped, 4000000u - (3u << 20));
  EXPECT_EQ(r.stdout_text, std::string(cage::kSpoolWindow, 'y'));
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 3 << 20);
  EXPECT_TRUE(r.spool_error.empty()) << r.spool_error;
  close(fd);
}

// Output that is not UTF-8 is carried byte for byte in the JSON result.
TEST_P(SupervisorTest, OutputThatIsNotUtf8IsReportedAsBase64) {
  const auto r = Run({"/bin/sh", "-c", "printf 'a\\377b'; printf ok >&2; exit 5"});
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.exit_code, 5);
  const auto report = cage::ResultReport(r);
  EXPECT_EQ(report["stdout_encoding"], "base64");
  EXPECT_EQ(report["stdout"], "Yf9i");
  EXPECT_EQ(report["stderr_encoding"], "utf-8");
  EXPECT_EQ(report["stderr"], "ok");
  EXPECT_NO_THROW((void)report.dump());
}

// Interactive use through the library: the output streams to the caller's
// fd while the job runs (a line is read before the job may end: it waits
// for a file the reader makes), stdin is relayed from the caller's fd only
// when given, and a pty is the job's own terminal.
TEST_P(SupervisorTest, OutputStreamsStdinIsRelayedAndAPtyIsTheJobsOwn) {
  EXPECT_EQ(cage::RunOptions{}.shm_max, kDefaultShmBytes);  // one default, in the API and the plan
  int stream[2];
  ASSERT_EQ(pipe2(stream, O_CLOEXEC), 0);
  const std::string go = tree_.Path("work/go");
  std::string first;
  bool waited = false;
  std::thread reader([&] {
    char c;
    while (first.find('\n') == std::string::npos && read(stream[0], &c, 1) == 1) first += c;
    waited = !std::filesystem::exists(go);  // the job is still waiting for it
    std::ofstream(go) << "";
  });
  cage::RunOptions o;
  o.stream_stdout_fd = stream[1];
  o.timeout = std::chrono::seconds(30);
  auto r = Run({"/bin/sh", "-c", "echo first; while [ ! -e " + go + " ]; do sleep 0.02; done; echo second"}, o);
  close(stream[1]);
  reader.join();
  close(stream[0]);
  EXPECT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(first, "first\n");
  EXPECT_TRUE(waited);
  EXPECT_EQ(r.stdout_text, "first\nsecond\n");  // the kept copy holds it all too

  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(write(in[1], "hi\n", 3), 3);
  close(in[1]);
  o = {};
  o.stdin_fd = in[0];
  r = Run({"/bin/cat"}, o);
  close(in[0]);
  EXPECT_EQ(r.stdout_text, "hi\n") << r.reason;
  r = Run({"/bin/readlink", "/proc/self/fd/0"});
  EXPECT_EQ(r.stdout_text, "/dev/null\n") << r.reason;

  o = {};
  o.pty = true;
  r = Run({"/usr/bin/python3", "-c",
           "import os; print(os.isatty(0), os.isatty(2), os.ttyname(1), sorted(os.listdir('/dev/pts')))"},
          o);
  EXPECT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "True True /dev/pts/0 ['0', 'ptmx']\r\n");

  // cage::Run(Spec) takes the same options.
  cage::Spec spec;
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  spec.argv = {"/bin/sh", "-c", "ls -A /dev/shm; echo x > /dev/shm/x && cat /dev/shm/x; tty"};
  o = UnprovenOptions();
  o.pty = true;
  r = RunAs(GetParam(), [&] { return cage::Run(spec, o); });
  EXPECT_EQ(r.stdout_text, "x\r\n/dev/pts/0\r\n") << r.reason;
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SupervisorTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});

}  // namespace
}  // namespace oarbank
