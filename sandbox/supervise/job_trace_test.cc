// The supervisor's tracer (job_trace.h), through cage::RunPolicy with
// JobHooks::trace, as root and as uid 65534: one that does not attach
// refuses the job before anything of it runs; one that does sees the
// module's exec and its calls, and the job runs confined as without it.
#include "sandbox/supervise/job_trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/supervise/supervisor.h"
#include "sandbox/supervise/supervisor_test.h"

namespace oarbank {
namespace {

class JobTraceTest : public AsUidTest {
 protected:
  // Runs `argv` traced by `command` (+ "-p KEEPER"); `log` gets the tracer's log.
  cage::Result Traced(const std::vector<std::string>& command, const std::vector<std::string>& argv,
                      std::string* log = nullptr) {
    const std::string json = tree_.RunnerJson("");
    const std::string log_copy = tree_.Path("trace.log");
    const cage::Result r = RunAs(GetParam(), [&] {
      auto trace = std::make_shared<cage::JobTrace>();
      const int log_fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      const int err_fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      trace->command = command;
      trace->log_fd = log_fd;
      trace->err_fd = err_fd;
      cage::JobHooks hooks;
      hooks.trace = trace;
      cage::RunOptions o = testing::UnprovenOptions();
      o.cwd = tree_.Path("work");
      cage::Result result = cage::RunPolicy(ParsePolicy(json).value(), argv, o, hooks);
      // The log, for the parent (this runs in a child as the test's uid).
      char buf[1 << 16];
      const ssize_t n = pread(log_fd, buf, sizeof buf, 0);
      result.stderr_text += "\n--trace--\n" + std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
      result.stderr_text += "\n--failure--\n" + trace->failure;
      close(log_fd);
      close(err_fd);
      return result;
    });
    if (log != nullptr) *log = r.stderr_text;
    return r;
  }

  TempTree tree_;
};

TEST_P(JobTraceTest, ATracerThatDoesNotAttachRefusesTheJobBeforeItRuns) {
  const std::string marker = tree_.Path("work/ran");
  const auto r = Traced({"/bin/false"}, {"/bin/sh", "-c", "touch " + marker});
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("explain: the tracer did not attach"), std::string::npos) << r.reason;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_P(JobTraceTest, AnAttachedTracerSeesTheModuleAndTheJobStaysConfined) {
  std::string log;
  const auto r = Traced({"/usr/bin/strace", "-f", "-q", "-o", "/proc/self/fd/3", "-e", "trace=execve,openat"},
                        {"/bin/cat", "/etc/shadow"}, &log);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.exit_code, 1);  // cat: still refused, EACCES below: the tracer only watches
  EXPECT_NE(log.find("execve(\"/bin/cat\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"/etc/shadow\", O_RDONLY) = -1 EACCES"), std::string::npos) << log;
  EXPECT_NE(log.find("--failure--\n"), std::string::npos);
  EXPECT_EQ(log.substr(log.find("--failure--\n") + 12), "") << log;
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, JobTraceTest, ::testing::Values(uid_t{0}, kNobody),
                         [](const auto& info) { return info.param == 0 ? "root" : "nobody"; });

}  // namespace
}  // namespace oarbank
