// Test support for the supervisor's tests (supervisor_test.cc and the files
// split from it by topic): running a job as a given uid in a forked child
// that is the supervisor, bringing its Result back, and looking for what it
// left in /proc. Included by test sources only.
#pragma once

#include "sandbox/common/read_file.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/supervise/supervisor.h"

#include <nettle/base64.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "sandbox/common/exit_codes.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/testing/child.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {

using testing::BecomeUser;
using testing::Eventually;
using testing::ExecInChild;
using testing::ReadAll;
using testing::RunInChild;
using testing::TempTree;
using testing::UnprovenOptions;
using namespace std::chrono_literals;

inline constexpr uid_t kNobody = 65534;

// A job's output as the JSON result carries it (text_encoding.h), back to bytes.
inline std::string Decoded(const std::string& text, const std::string& encoding) {
  if (encoding != "base64") return text;
  base64_decode_ctx ctx;
  base64_decode_init(&ctx);
  std::string out(BASE64_DECODE_LENGTH(text.size()), '\0');
  size_t n = out.size();
  if (!base64_decode_update(&ctx, &n, reinterpret_cast<uint8_t*>(out.data()), text.size(), text.data()) ||
      !base64_decode_final(&ctx))
    return "<bad base64>";
  out.resize(n);
  return out;
}

inline cage::Result FromReport(const nlohmann::json& j) {
  cage::Result r;
  r.exit_code = j.at("exit_code");
  r.signal = j.at("signal");
  const std::string fault = j.at("fault");
  for (auto f :
       {cage::Fault::kNone, cage::Fault::kRefused, cage::Fault::kExec, cage::Fault::kTimeout, cage::Fault::kOom})
    if (fault == cage::FaultName(f)) r.fault = f;
  r.reason = j.at("reason");
  if (j.at("refused").get<bool>() != r.refused()) r.reason += " [the JSON's refused disagrees with its fault]";
  r.stdout_text = Decoded(j.at("stdout"), j.at("stdout_encoding"));
  r.stderr_text = Decoded(j.at("stderr"), j.at("stderr_encoding"));
  r.stdout_bytes = j.at("stdout_bytes");
  r.stderr_bytes = j.at("stderr_bytes");
  r.stdout_spooled = j.at("stdout_spooled");
  r.stderr_spooled = j.at("stderr_spooled");
  r.spool_error = j.at("spool_error");
  r.stdout_truncated = j.at("stdout_truncated");
  r.stderr_truncated = j.at("stderr_truncated");
  r.stdout_dropped = j.at("stdout_dropped");
  r.stderr_dropped = j.at("stderr_dropped");
  r.seconds = j.at("seconds");
  r.container.cgroup = j.at("container").at("cgroup");
  r.container.proof = j.at("container").at("proof");
  r.container.namespaces = j.at("container").at("namespaces");
  r.container.verified.seccomp = j.at("container").at("verified").at("Seccomp");
  return r;
}

// Runs `job` in a forked child as `uid` (the supervisor's identity) and
// brings its Result back as JSON. The child is the supervisor: the test
// process itself is never confined and keeps no job state.
inline cage::Result RunAs(uid_t uid, const std::function<cage::Result()>& job) {
  const std::string text = RunInChild([&] {
                             if (!BecomeUser(uid))
                               return std::string("{\"setup\": \"setuid: ") + strerror(errno) + "\"}";
                             return cage::ResultReport(job()).dump();
                           }).text;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || j.contains("setup")) {
    cage::Result r;
    r.reason = "test setup failed: " + text;
    return r;
  }
  return FromReport(j);
}

// Live processes whose command line (NUL-separated) holds `token`.
inline std::vector<pid_t> ProcessesWithCmdline(const std::string& token) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    // Plain reads: a process that exits meanwhile answers ESRCH, on which an
    // ifstream's buffer throws; such a process is simply not found.
    const std::string cmdline = ReadFileUpTo(entry.path() / "cmdline", 1 << 16).value_or("");
    const std::string stat_line = ReadFileUpTo(entry.path() / "stat", 1 << 12).value_or("");
    const auto close_paren = stat_line.rfind(')');
    const bool zombie =
        close_paren != std::string::npos && stat_line.size() > close_paren + 2 && stat_line[close_paren + 2] == 'Z';
    if (!zombie && cmdline.find(token) != std::string::npos) found.push_back(std::stoi(name));
  }
  return found;
}

// Live `/bin/sleep <marker>` processes (the marker is a job's sleep time).
inline std::vector<pid_t> Sleepers(const std::string& marker) {
  return ProcessesWithCmdline(std::string("/bin/sleep") + '\0' + marker + '\0');
}

// A unique marker per test run, so concurrent test binaries never meet.
inline std::string Marker(const char* what) {
  static int n = 0;
  return std::to_string(1000 + getpid() % 8000) + "." + std::to_string(++n) + std::to_string(getpid() % 97) + what;
}

// A test run as each uid of its parameter (root and 65534), skipped, and
// saying why, where that uid cannot be taken or the cage is not available.
class AsUidTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    if (GetParam() != getuid() && getuid() != 0) GTEST_SKIP() << "switching to uid " << GetParam() << " needs root";
    const auto a = cage::CheckAvailability();
    if (!a.available) GTEST_SKIP() << "the cage is not available here: " << a.reason;
  }
};

class SupervisorTest : public AsUidTest {
 protected:
  cage::Result Run(const std::vector<std::string>& argv, const cage::RunOptions& options = {},
                   const std::string& extra = "") {
    const std::string json = tree_.RunnerJson(extra);
    return RunAs(GetParam(), [&] {
      auto policy = ParsePolicy(json);
      if (!policy.ok()) {
        cage::Result r;
        r.reason = PolicyErrorLine(policy.error());
        return r;
      }
      cage::RunOptions o = options;
      o.unproven = true;  // the cage itself is under test here
      if (!o.cwd) o.cwd = tree_.Path("work");
      return cage::RunPolicy(policy.value(), argv, o);
    });
  }

  // The same job with the proof gate on: nothing overridden.
  cage::Result RunGated(const std::vector<std::string>& argv, cage::RunOptions o) {
    const std::string json = tree_.RunnerJson("");
    return RunAs(GetParam(), [&] {
      if (!o.cwd) o.cwd = tree_.Path("work");
      return cage::RunPolicy(ParsePolicy(json).value(), argv, o);
    });
  }
  // An attestation for this test binary (the launcher of its jobs) proving
  // `classes`, with `forge` applied to its binding.
  std::string Attest(std::vector<std::string> classes, void (*forge)(AttestationBinding&) = nullptr) {
    Attestation a;
    a.binding = BindingForThisProcess(ProbeHost());
    if (forge) forge(a.binding);
    a.proven_classes = std::move(classes);
    const std::string path = tree_.Path("attestation.json");
    EXPECT_EQ(WriteAttestation(path, a), "");
    return path;
  }

  std::string ExpectedUid() const { return std::to_string(GetParam()); }

  TempTree tree_;
};

}  // namespace oarbank
