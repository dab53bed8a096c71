// The CLI around the supervisor: `oarbank-agent run` and `sandbox-exec
// --gate-fd`, run as programs.
#include "sandbox/common/subprocess.h"
#include "sandbox/supervise/supervisor_test.h"

namespace oarbank {
namespace {

// ---- the CLI: `oarbank-agent run` and `sandbox-exec --gate-fd` ---------

struct Spawned {
  int status = -1;
  std::string out, err;
};

// Runs argv (stdout and stderr captured; the test's environment); `gate`
// (if >= 0) becomes fd 3, and `meanwhile` is called with its pid while it runs.
Spawned Spawn(const std::vector<std::string>& argv, int gate = -1,
              const std::function<void(pid_t)>& meanwhile = nullptr) {
  SubprocessSpec spec;
  spec.argv = argv;
  for (char** e = environ; *e != nullptr; ++e) spec.env.emplace_back(*e);
  if (gate >= 0) spec.fds = {{gate, 3}};
  CaptureLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  limits.on_start = meanwhile;
  const CapturedRun run = RunCaptured(spec, limits);
  Spawned s;
  s.status = run.wait_status;
  s.out = run.out;
  s.err = run.err;
  return s;
}

int ExitStatus(const Spawned& s) { return WIFEXITED(s.status) ? WEXITSTATUS(s.status) : -1; }

class AgentCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto a = cage::CheckAvailability();
    if (!a.available) GTEST_SKIP() << "the cage is not available here: " << a.reason;
    tree_.Write("policy.json", tree_.RunnerJson(), 0644);
  }
  Spawned Run(std::vector<std::string> args) {
    args.insert(args.begin(), {OARBANK_AGENT, "run", "--unproven"});
    return Spawn(args);
  }
  std::string Policy() const { return tree_.Path("policy.json"); }
  TempTree tree_;
};

TEST_F(AgentCliTest, RunPassesTheModulesOutputAndStatus) {
  auto s = Run({Policy(), "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 5"});
  EXPECT_EQ(ExitStatus(s), 5);
  EXPECT_EQ(s.out, "out\n");
  EXPECT_EQ(s.err, "err\n");
  s = Run({Policy(), "--", "/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(ExitStatus(s), 128 + SIGTERM);
  EXPECT_EQ(s.err, "");
}

TEST_F(AgentCliTest, RunRefusesAnUnprovenClassAndSaysWhatToDo) {
  std::vector<std::string> args = {OARBANK_AGENT, "run", Policy(), "--", "/bin/true"};
  const std::string missing = tree_.Path("no-attestation.json");
  setenv("OARBANK_BATTERY_ATTESTATION", missing.c_str(), 1);
  const auto s = Spawn(args);
  unsetenv("OARBANK_BATTERY_ATTESTATION");
  EXPECT_EQ(ExitStatus(s), kExitNotEnforced);
  EXPECT_EQ(s.err, "sandbox: refused: sandbox: CAPABILITY_NOT_ENFORCED: battery.proven: class \"" +
                       PolicyClass(tree_.Runner()) + "\" is not proven: no battery attestation at " + missing +
                       ": run oarbank-conform on this host first\n");
}

TEST_F(AgentCliTest, RunStatesEachFaultOnOneLine) {
  auto s = Run({"--timeout", "0.2", Policy(), "--", "/bin/sleep", "30"});
  EXPECT_EQ(ExitStatus(s), 128 + SIGKILL);
  EXPECT_EQ(s.err, "sandbox: timeout: killed at the timeout of 0.2 s\n");
  s = Run({Policy(), "--", tree_.Path("work/absent")});
  EXPECT_EQ(ExitStatus(s), kExitExecFailed);
  EXPECT_EQ(s.err, "sandbox: exec: exec: " + tree_.Path("work/absent") + ": " + strerror(ENOENT) + "\n");
  // What streams is all of it; the cap bounds the copy kept for --json.
  s = Run({"--stdout-max", "3", Policy(), "--", "/bin/echo", "abcdef"});
  EXPECT_EQ(ExitStatus(s), 0);
  EXPECT_EQ(s.out, "abcdef\n");
  EXPECT_EQ(s.err, "");
  s = Run({"--landlock-abi-max", "2", Policy(), "--", "/bin/true"});
  EXPECT_EQ(ExitStatus(s), kExitNotEnforced);
  EXPECT_EQ(s.err.rfind("sandbox: refused: sandbox: CAPABILITY_NOT_ENFORCED: filesystem", 0), 0u) << s.err;
  s = Run({"--env", "NOEQUALS", Policy(), "--", "/bin/true"});
  EXPECT_EQ(ExitStatus(s), kExitUsage);
  EXPECT_EQ(s.err, "usage: --env: expected NAME=VALUE, got NOEQUALS\n");
  // Each --env takes one value: the policy after it stays the policy.
  s = Run({"--env", "ONE=1", "--env", "TWO=2", Policy(), "--", "/usr/bin/env"});
  EXPECT_EQ(ExitStatus(s), 0) << s.err;
  EXPECT_NE(s.out.find("ONE=1\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("TWO=2\n"), std::string::npos) << s.out;
  s = Run({"--json", Policy(), "--", "/bin/sh", "-c", "exit 4"});
  EXPECT_EQ(ExitStatus(s), 4);
  const auto j = nlohmann::json::parse(s.out);
  EXPECT_EQ(j["exit_code"], 4);
  EXPECT_EQ(j["fault"], "none");
  EXPECT_EQ(j["refused"], false);
}

// The launcher alone behind the gate, driven the way any supervisor can:
// a unix socket as fd 3, SO_PASSCRED for the launcher's pid.
TEST_F(AgentCliTest, SandboxExecWaitsAtTheGate) {
  const std::string marker = tree_.Path("work/ran");
  for (bool release : {true, false}) {
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    const int one = 1;
    ASSERT_EQ(setsockopt(pair[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one), 0);
    std::string status_at_gate;
    bool existed_at_gate = true;
    const auto s =
        Spawn({OARBANK_AGENT, "sandbox-exec", "--gate-fd", "3", Policy(), "--", "/bin/sh", "-c", "touch " + marker},
              pair[1], [&](pid_t pid) {
                close(pair[1]);
                char byte = 0;
                char control[CMSG_SPACE(sizeof(ucred))];
                iovec iov{&byte, 1};
                msghdr msg{};
                msg.msg_iov = &iov;
                msg.msg_iovlen = 1;
                msg.msg_control = control;
                msg.msg_controllen = sizeof control;
                if (recvmsg(pair[0], &msg, 0) != 1 || byte != kGateReady) return;
                const auto* cred = reinterpret_cast<const ucred*>(CMSG_DATA(CMSG_FIRSTHDR(&msg)));
                EXPECT_EQ(cred->pid, pid);
                std::ifstream in("/proc/" + std::to_string(pid) + "/status");
                status_at_gate.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
                existed_at_gate = std::filesystem::exists(marker);  // nothing ran yet
                if (release) {
                  EXPECT_EQ(send(pair[0], &kGateGo, 1, 0), 1);
                }
                close(pair[0]);
              });
    EXPECT_FALSE(existed_at_gate);
    EXPECT_EQ(CheckGateReading(ParseProcStatus(status_at_gate), getpid()), std::nullopt);
    if (release) {
      EXPECT_EQ(ExitStatus(s), 0) << s.err;
      EXPECT_TRUE(std::filesystem::exists(marker));
      std::filesystem::remove(marker);
    } else {
      EXPECT_EQ(ExitStatus(s), kExitNotEnforced);
      EXPECT_EQ(s.err, "sandbox: gate: the supervisor did not release the gate\n");
      EXPECT_FALSE(std::filesystem::exists(marker));
    }
  }
}

}  // namespace
}  // namespace oarbank
