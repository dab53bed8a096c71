// The supervisor on this kernel, for real: every job runs through
// cage::RunPolicy / cage::Run with the supervisor as root and, rootless, as
// uid 65534 (a forked test child drops to it first, so the user namespace
// is made by an unprivileged process). Each denial or fault is asserted
// exactly (a named fault, a signal, an errno's text), next to a positive
// control that shows the test can see the thing it says is absent; what
// must not survive is looked for from outside, in /proc.
#include "sandbox/supervise/supervisor.h"
#include "sandbox/common/read_file.h"
#include "sandbox/launch/job_devices.h"

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

namespace {

// What this test binary does when a test runs it as the module (its
// environment is built: only named variables reach it).
//   x32     getpid through the x32 ABI: the filter's bad-arch action kills
//   native  the same call through the native ABI (the positive control)
__attribute__((constructor)) void SupervisorTestHelper() {
  const char* helper = getenv("OARBANK_SUPERVISOR_TEST_HELPER");
  if (helper == nullptr) return;
  constexpr long kX32SyscallBit = 0x40000000;
  const long nr = strcmp(helper, "x32") == 0 ? (kX32SyscallBit | SYS_getpid) : SYS_getpid;
  syscall(nr);
  _exit(0);
}

}  // namespace

namespace oarbank {
namespace {

using testing::BecomeUser;
using testing::ExecInChild;
using testing::ReadAll;
using testing::RunInChild;
using testing::TempTree;
using testing::UnprovenOptions;
using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

// A job's output as the JSON result carries it (text_encoding.h), back to bytes.
std::string Decoded(const std::string& text, const std::string& encoding) {
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

cage::Result FromReport(const nlohmann::json& j) {
  cage::Result r;
  r.exit_code = j.at("exit_code");
  r.signal = j.at("signal");
  r.refused = j.at("refused");
  const std::string fault = j.at("fault");
  for (auto f :
       {cage::Fault::kNone, cage::Fault::kRefused, cage::Fault::kExec, cage::Fault::kTimeout, cage::Fault::kOom})
    if (fault == cage::FaultName(f)) r.fault = f;
  r.reason = j.at("reason");
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
cage::Result RunAs(uid_t uid, const std::function<cage::Result()>& job) {
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
std::vector<pid_t> ProcessesWithCmdline(const std::string& token) {
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
std::vector<pid_t> Sleepers(const std::string& marker) {
  return ProcessesWithCmdline(std::string("/bin/sleep") + '\0' + marker + '\0');
}

// Waits up to `limit` for `done`.
bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

// A unique marker per test run, so concurrent test binaries never meet.
std::string Marker(const char* what) {
  static int n = 0;
  return std::to_string(1000 + getpid() % 8000) + "." + std::to_string(++n) + std::to_string(getpid() % 97) + what;
}

class SupervisorTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    if (GetParam() != getuid() && getuid() != 0) GTEST_SKIP() << "switching to uid " << GetParam() << " needs root";
    const auto a = cage::CheckAvailability();
    if (!a.available) GTEST_SKIP() << "the cage is not available here: " << a.reason;
  }

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

TEST_P(SupervisorTest, ExitCodeAndOutputOfTheModule) {
  const auto r = Run({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.fault, cage::Fault::kNone);
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_EQ(r.container.verified.seccomp, "2");  // what the gate read
}

// Cage-before-capability: a job whose class the attestation does not prove
// is refused before anything of it runs; the marker shows no module
// instruction ran.
TEST_P(SupervisorTest, ProofGateRefusesWithoutAnAttestation) {
  cage::RunOptions o;
  o.attestation_path = tree_.Path("no-attestation.json");
  const std::string marker = tree_.Path("work/ran");
  const auto r = RunGated({"/bin/sh", "-c", "touch " + marker}, o);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_TRUE(r.refused);
  EXPECT_NE(r.reason.find("battery.proven"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find(PolicyClass(tree_.Runner())), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("run oarbank-conform"), std::string::npos) << r.reason;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_P(SupervisorTest, ProofGateRunsAProvenClass) {
  cage::RunOptions o;
  o.attestation_path = Attest({PolicyClass(tree_.Runner())});
  const auto r = RunGated({"/bin/echo", "ran"}, o);
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, "ran\n");
  EXPECT_EQ(r.container.proof, "proven (" + o.attestation_path + ")");
}

TEST_P(SupervisorTest, ProofGateRefusesAnotherClassAndAForgedBinding) {
  cage::RunOptions o;
  o.attestation_path = Attest({"coordinator net=none exec_writable=false gpu=none broker=no"});
  auto r = RunGated({"/bin/true"}, o);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("the battery has not passed for the class"), std::string::npos) << r.reason;
  // The right class, for another launcher binary, or another kernel build.
  o.attestation_path = Attest({PolicyClass(tree_.Runner())}, [](AttestationBinding& b) {
    b.launcher_sha256 = std::string(64, 'a');
    b.launcher_stat = "0:0:0:0:0";  // another file
  });
  r = RunGated({"/bin/true"}, o);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("launcher.sha256 differs"), std::string::npos) << r.reason;
  o.attestation_path = Attest({PolicyClass(tree_.Runner())},
                              [](AttestationBinding& b) { b.kernel_version = "Linux version 0.0 (forged)"; });
  r = RunGated({"/bin/true"}, o);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("kernel.version differs"), std::string::npos) << r.reason;
}

TEST_P(SupervisorTest, ProofGateRefusesAnAttestationAnotherUserCouldWrite) {
  cage::RunOptions o;
  o.attestation_path = Attest({PolicyClass(tree_.Runner())});
  // Neither root nor the supervisor's own uid.
  ASSERT_EQ(chown(o.attestation_path.c_str(), 12345, 12345), 0);
  const auto r = RunGated({"/bin/true"}, o);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("is owned by uid 12345"), std::string::npos) << r.reason;
}

TEST_P(SupervisorTest, ProofGateOverrideRunsAndSaysSo) {
  cage::RunOptions o;
  o.attestation_path = tree_.Path("no-attestation.json");
  o.unproven = true;
  const auto r = RunGated({"/bin/echo", "ran"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.container.proof, "unproven (operator override)");
}

TEST_P(SupervisorTest, RunSpecIsGatedByDefault) {
  cage::Spec spec;
  spec.argv = {"/bin/true"};
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  const std::string missing = tree_.Path("no-attestation.json");
  const auto r = RunAs(GetParam(), [&] {
    setenv("OARBANK_BATTERY_ATTESTATION", missing.c_str(), 1);
    return cage::Run(spec);
  });
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_NE(r.reason.find("battery.proven"), std::string::npos) << r.reason;
}

TEST_P(SupervisorTest, ExitSeventyFromTheModuleIsNotRefused) {
  // The launcher's own "not enforced" status, from a module that ran.
  const auto r = Run({"/bin/sh", "-c", "exit 70"});
  EXPECT_EQ(r.fault, cage::Fault::kNone);
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.exit_code, kExitNotEnforced);
}

TEST_P(SupervisorTest, KilledBySignalIsReported) {
  const auto r = Run({"/bin/sh", "-c", "kill -SEGV $$"});
  EXPECT_EQ(r.fault, cage::Fault::kNone);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.exit_code, -1);
}

TEST_P(SupervisorTest, SeccompKillIsSigsys) {
  // This binary as the module: an x32 syscall takes the filter's bad-arch
  // action and the process dies by SIGSYS.
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  const std::string tool = R"("tools": [{"id": "test", "paths": [")" + exe + R"("]}])";
  cage::RunOptions o = UnprovenOptions();
  o.env["OARBANK_SUPERVISOR_TEST_HELPER"] = "x32";
  const auto r = Run({exe}, o, tool);
  EXPECT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.signal, SIGSYS);
  EXPECT_EQ(r.exit_code, -1);
  // Positive control: the native getpid returns.
  o.env["OARBANK_SUPERVISOR_TEST_HELPER"] = "native";
  const auto ok = Run({exe}, o, tool);
  EXPECT_EQ(ok.signal, 0) << ok.reason;
  EXPECT_EQ(ok.exit_code, 0);
}

TEST_P(SupervisorTest, ExecFailureIsAFaultOfItsOwn) {
  const auto r = Run({tree_.Path("work/no-such-binary")});
  EXPECT_EQ(r.fault, cage::Fault::kExec);
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.exit_code, kExitExecFailed);
  EXPECT_EQ(r.reason, "exec: " + tree_.Path("work/no-such-binary") + ": " + strerror(ENOENT));
}

TEST_P(SupervisorTest, RefusedIsNeverARun) {
  const std::string marker = tree_.Path("work/ran");
  cage::RunOptions floor = UnprovenOptions();
  floor.abi_floor = 99;
  const auto r = Run({"/bin/sh", "-c", "touch " + marker}, floor);
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.fault, cage::Fault::kRefused);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.reason, "abi_floor: this host's Landlock ABI is " + std::to_string(ProbeHost().landlock_abi) +
                          ", below the floor 99");
  EXPECT_FALSE(std::filesystem::exists(marker));
  // Positive control: the same command without the floor leaves the file.
  EXPECT_EQ(Run({"/bin/sh", "-c", "touch " + marker}).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(marker));
}

TEST_P(SupervisorTest, RunAsNeedsARootSupervisor) {
  cage::RunOptions o = UnprovenOptions();
  o.run_as_uid = kNobody;
  o.run_as_gid = kNobody;
  const auto r = Run({"/usr/bin/id", "-u"}, o);
  if (GetParam() == 0) {
    EXPECT_EQ(r.fault, cage::Fault::kNone) << r.reason;
    EXPECT_EQ(r.stdout_text, "65534\n");
  } else {
    EXPECT_TRUE(r.refused);
    EXPECT_EQ(r.reason, "run_as: needs a root supervisor");
  }
}

TEST_P(SupervisorTest, FreshProcShowsOnlyTheJob) {
  // The module's shell is pid 2 (init is 1); ls is its child.
  const auto r = Run({"/bin/sh", "-c", "echo $$; cd /proc && echo [0-9]*"});
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  std::istringstream out(r.stdout_text);
  std::string self, pids;
  std::getline(out, self);
  std::getline(out, pids);
  EXPECT_EQ(self, "2");
  EXPECT_EQ(pids, "1 2");  // echo is a builtin: nothing else exists
  // Positive control: the host's /proc has far more.
  EXPECT_GT(ProcessesWithCmdline("").size(), 2u);
}

// A root job owns /etc's root-only files on disk: it sees /etc through the
// idmapped view (checked at the gate) or the narrowed grant, never as owner.
TEST_P(SupervisorTest, RootOnlyFilesInEtcStayUnreadable) {
  struct stat st {};
  if (stat("/etc/shadow", &st) != 0 || (st.st_mode & S_IROTH) || st.st_uid != 0)
    GTEST_SKIP() << "no root-owned, not world-readable /etc/shadow on this host";
  const auto r = Run({"/bin/sh", "-c", "cat /etc/shadow 2>&1 >/dev/null; head -c 5 /etc/passwd"});
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "cat: /etc/shadow: Permission denied\nroot:");
}

TEST_P(SupervisorTest, NamespacesAreFreshAndNetIsEmpty) {
  auto link = [](const char* ns) {
    char buf[64] = {};
    return readlink((std::string("/proc/self/ns/") + ns).c_str(), buf, sizeof buf - 1) > 0 ? std::string(buf) : "";
  };
  const auto r = Run({"/bin/sh", "-c",
                      "for n in user pid ipc uts mnt net; do readlink /proc/self/ns/$n; done; "
                      "id -u; hostname; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"});
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  std::istringstream out(r.stdout_text);
  for (const char* ns : {"user", "pid", "ipc", "uts", "mnt", "net"}) {
    std::string inside;
    std::getline(out, inside);
    EXPECT_NE(inside, link(ns)) << ns;
    EXPECT_EQ(inside.rfind(std::string(ns) + ":[", 0), 0u) << ns << ": " << inside;
  }
  std::string uid, host, devices;
  std::getline(out, uid);
  std::getline(out, host);
  std::getline(out, devices, '\0');
  EXPECT_EQ(uid, ExpectedUid());  // the uid map is the identity
  EXPECT_EQ(host, "oarbank");
  EXPECT_EQ(devices, "lo\n");  // an empty network namespace: loopback only
  EXPECT_EQ(r.container.namespaces, "user,pid,ipc,uts,mnt,net");
}

TEST_P(SupervisorTest, EgressAllowlistGetsANetworkOfItsOwn) {
  // Its only listener is the agent's proxy (supervisor_egress_test.cc).
  const std::string egress = R"("net": {"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 3128})";
  char buf[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", buf, sizeof buf - 1), 0);
  const auto r = Run({"/usr/bin/readlink", "/proc/self/ns/net"}, {}, egress);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_NE(r.stdout_text, std::string(buf) + "\n");
  EXPECT_EQ(r.stdout_text.rfind("net:[", 0), 0u) << r.stdout_text;
  EXPECT_EQ(r.container.namespaces, "user,pid,ipc,uts,mnt,net");
}

TEST_P(SupervisorTest, TheAgentsSecretsAndFdsDoNotReachTheModule) {
  setenv("OARBANK_TEST_AGENT_TOKEN", "s3cret", 1);
  const int leaked = open(tree_.Path("outside/secret").c_str(), O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leaked, 3);
  cage::RunOptions o = UnprovenOptions();
  o.env["OARBANK_JOB_ID"] = "job-7";
  const std::string script = "env; ls /proc/self/fd";
  const auto r = Run({"/bin/sh", "-c", script}, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text.find("s3cret"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("OARBANK_JOB_ID=job-7\n"), std::string::npos);
  // ls's own directory fd is 3; nothing else beyond stdio.
  EXPECT_NE(r.stdout_text.find("\n0\n1\n2\n3\n"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("\n" + std::to_string(leaked) + "\n", r.stdout_text.find("\n0\n1\n2\n3\n") + 7),
            std::string::npos);
  // Positive control: a plain fork+exec would have handed both over.
  const std::string plain = ExecInChild({"/bin/sh", "-c", script}).text;
  EXPECT_NE(plain.find("s3cret"), std::string::npos);
  EXPECT_NE(plain.find("\n" + std::to_string(leaked) + "\n"), std::string::npos);
  close(leaked);
  unsetenv("OARBANK_TEST_AGENT_TOKEN");
}

TEST_P(SupervisorTest, TheAgentsIgnoredAndBlockedSignalsAreNotInherited) {
  // exec keeps SIG_IGN and the signal mask: an agent that ignores SIGPIPE
  // would hand a module a different `yes | head`.
  signal(SIGPIPE, SIG_IGN);
  signal(SIGUSR1, SIG_IGN);
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigprocmask(SIG_BLOCK, &usr2, &old);
  // grep itself, not a shell (which would reset the mask on its own).
  const auto r = Run({"/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"});
  // Positive control: a plain fork+exec from here inherits both.
  const std::string plain = ExecInChild({"/bin/grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"}).text;
  signal(SIGPIPE, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  EXPECT_EQ(plain, "SigBlk:\t0000000000000800\nSigIgn:\t0000000000001200\n");
}

TEST_P(SupervisorTest, NewSessionAndNoControllingTerminal) {
  // The supervisor gets a controlling terminal first (a pty), so the
  // module could inherit one if the supervisor let it.
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0)
    GTEST_SKIP() << "no pseudo-terminal to give the supervisor (devpts): " << strerror(errno);
  const std::string json = tree_.RunnerJson();
  const uid_t uid = GetParam();
  const std::string text =
      RunInChild([&] {
        close(master);
        std::string text;
        if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) != 0 || !BecomeUser(uid)) {
          text = std::string("setup: ") + strerror(errno);
        } else {
          std::ifstream stat("/proc/self/stat");
          std::string own;
          std::getline(stat, own);
          auto policy = ParsePolicy(json);
          cage::RunOptions o = UnprovenOptions();
          o.cwd = "/";
          // pid, session and tty_nr (fields 1, 6, 7) of the module, and its try at /dev/tty.
          const auto r = cage::RunPolicy(
              policy.value(), {"/bin/sh", "-c", "cut -d' ' -f1,6,7 /proc/self/stat; readlink /proc/self/fd/0"}, o);
          text =
              "agent: " + own.substr(own.rfind(')') + 2) + "\n" + r.stdout_text + "fault: " + cage::FaultName(r.fault);
        }
        return text;
      }).text;
  close(slave);
  close(master);
  std::istringstream in(text);
  std::string agent, module, tty, fault;
  std::getline(in, agent);
  std::getline(in, module);
  std::getline(in, tty);
  std::getline(in, fault);
  ASSERT_EQ(fault, "fault: none") << text;
  // Positive control: the supervisor has a controlling terminal (tty_nr != 0).
  std::istringstream agent_fields(agent.substr(agent.find(' ') + 1));
  std::string state, ppid, pgrp, session, tty_nr;
  agent_fields >> state >> ppid >> pgrp >> session >> tty_nr;
  EXPECT_NE(tty_nr, "0") << agent;
  EXPECT_NE(tty_nr, "") << agent;
  // The module's `cut` (pid 3, child of the shell, pid 2): session 2, the
  // shell's own, and tty_nr 0: no controlling terminal. stdin is /dev/null.
  EXPECT_EQ(module, "3 2 0") << text;
  EXPECT_EQ(tty, "/dev/null") << text;
}

TEST_P(SupervisorTest, DoubleForkedDaemonIsDeadWhenRunReturns) {
  const std::string marker = Marker("1");
  const std::string daemon = "(setsid /bin/sleep " + marker + " </dev/null >/dev/null 2>&1 &) ; echo started";
  const auto r = Run({"/bin/sh", "-c", daemon});
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "started\n");
  EXPECT_EQ(Sleepers(marker), std::vector<pid_t>{});
  // Positive control: unsupervised, the same daemon outlives its parent.
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", daemon.c_str(), nullptr);
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
  EXPECT_TRUE(Eventually([&] { return Sleepers(marker).size() == 1; }));
  Eventually([&] {
    for (pid_t p : Sleepers(marker)) kill(p, SIGKILL);
    return Sleepers(marker).empty();
  });
}

TEST_P(SupervisorTest, TimeoutKillsTheContainer) {
  const std::string marker = Marker("2");
  cage::RunOptions o = UnprovenOptions();
  o.timeout = 300ms;
  const auto r = Run({"/bin/sh", "-c", "(setsid /bin/sleep " + marker + " &); /bin/sleep " + marker}, o);
  EXPECT_EQ(r.fault, cage::Fault::kTimeout);
  EXPECT_FALSE(r.refused);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.reason, "killed at the timeout of 0.3 s");
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_EQ(Sleepers(marker), std::vector<pid_t>{});
}

TEST_P(SupervisorTest, KillingTheSupervisorKillsTheJob) {
  const std::string marker = Marker("3");
  // This test process reaps what the dead supervisor leaves (its keeper),
  // as systemd would for an agent.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string json = tree_.RunnerJson();
  const uid_t uid = GetParam();
  const std::string work = tree_.Path("work");
  const pid_t supervisor = fork();
  if (supervisor == 0) {
    if (uid != getuid() && !BecomeUser(uid)) _exit(1);
    cage::RunOptions o = UnprovenOptions();
    o.cwd = work;
    (void)cage::RunPolicy(  // killed before it returns
        ParsePolicy(json).value(), {"/bin/sh", "-c", "(setsid /bin/sleep " + marker + " &); /bin/sleep " + marker}, o);
    _exit(0);
  }
  const bool started = Eventually([&] { return Sleepers(marker).size() == 2; });
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);
  EXPECT_TRUE(started) << "the job never started";
  EXPECT_TRUE(Eventually([&] { return Sleepers(marker).empty(); }))
      << Sleepers(marker).size() << " processes of the job survived the supervisor";
  // Every child (the supervisor, its orphaned keeper) ends and is reaped.
  EXPECT_TRUE(Eventually([] {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    return waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
  }));
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

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

TEST_P(SupervisorTest, RunSpecWorktreeReadOnlyScratchWritable) {
  // The Go seed's Spec: a read-only worktree, a writable scratch (HOME).
  tree_.Write("bundle/src.txt", "source\n", 0644);
  cage::Spec spec;
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  spec.argv = {"/bin/sh", "-c", "cat src.txt; echo x > src2.txt; echo built > $HOME/out.txt && pwd"};
  const auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "source\n" + tree_.Path("bundle") + "\n");
  EXPECT_NE(r.stderr_text.find(std::string("src2.txt: ") + strerror(EROFS)), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(tree_.Path("bundle/src2.txt")));
  EXPECT_TRUE(std::filesystem::exists(tree_.Path("work/out.txt")));
  // worktree_writable: the same write now lands.
  spec.worktree = tree_.Path("data");
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c", "echo x > src2.txt"};
  EXPECT_EQ(RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); }).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(tree_.Path("data/src2.txt")));
}

TEST_P(SupervisorTest, RunSpecRefusesBelowTheAbiFloorAndBadPaths) {
  cage::Spec spec;
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  spec.argv = {"/bin/true"};
  spec.abi_floor = 99;
  auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.reason.rfind("abi_floor: ", 0), 0u) << r.reason;
  spec.abi_floor = 1;
  spec.read_dirs = {"relative/dir"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.reason, "policy: read_dirs[0]: expected an absolute path, got \"relative/dir\"");
}

// What one job leaves for the next: run 1 replaces a nested grant (a
// worktree inside the agent's state) with a link to the caller's home and
// plants a .git pointer to it; run 2, the same Spec, is refused naming the
// link, and never reads the secret or writes the home.
TEST_P(SupervisorTest, RunSpecTwiceTheSecondRefusesWhatTheFirstPlanted) {
  const std::string state = tree_.Path("data/state");
  const std::string wt = state + "/worktrees/t42";
  std::filesystem::create_directories(wt);
  std::filesystem::create_directories(tree_.Path("data/plain"));
  chown(state.c_str(), GetParam(), GetParam());
  chown((state + "/worktrees").c_str(), GetParam(), GetParam());
  chown(wt.c_str(), GetParam(), GetParam());
  chown(tree_.Path("data/plain").c_str(), GetParam(), GetParam());
  const std::string home = tree_.Path("outside");
  cage::Spec spec;
  spec.state_dirs = {state};
  spec.worktree = wt;
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c",
               "cd / && mv " + state + "/worktrees " + state + "/wt-old && mkdir " + state + "/worktrees && ln -s " +
                   home + " " + wt};
  auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  ASSERT_EQ(r.exit_code, 0) << r.reason << r.stderr_text;
  ASSERT_TRUE(std::filesystem::is_symlink(wt));  // run 1 could plant it: the attack is real
  spec.argv = {"/bin/sh", "-c", "cat secret; echo planted >> secret"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused);
  EXPECT_EQ(r.reason.rfind("policy: worktree: " + wt + " is a symbolic link (to " + home + "), refused: ", 0), 0u)
      << r.reason;
  EXPECT_EQ(ReadFileUpTo(home + "/secret", 1 << 10).value_or(""), "ssh private key\n");
  // A .git pointer planted in a plain worktree names the secret's directory.
  spec = {};
  spec.worktree = tree_.Path("data/plain");
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c", "printf 'gitdir: " + home + "\\n' > .git"};
  ASSERT_EQ(RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); }).exit_code, 0);
  spec.argv = {"/bin/cat", home + "/secret"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused);
  EXPECT_NE(r.reason.find("which is not a git directory that lists this worktree"), std::string::npos) << r.reason;
  EXPECT_EQ(r.stdout_text, "");
}

TEST_P(SupervisorTest, FreezeNeedsACgroupLeaf) {
  const std::string json = tree_.RunnerJson();
  const std::string work = tree_.Path("work");
  const auto r = RunAs(GetParam(), [&] {
    cage::RunOptions o = UnprovenOptions();
    o.cwd = work;
    cage::Job job = cage::Start(ParsePolicy(json).value(), {"/bin/sleep", "0.2"}, o);
    const std::string frozen = job.Freeze();
    const std::string thawed = job.Thaw();
    cage::Result result = job.Wait();
    // What the supervisor (as this uid) knows about its cgroup.
    result.reason = frozen + "|" + thawed + "|" + DetectCgroupDelegation(ProbeHost().cgroup).detail;
    return result;
  });
  const std::string detail = r.reason.substr(r.reason.rfind('|') + 1);
  if (r.container.cgroup.empty()) {
    EXPECT_EQ(r.reason,
              "cgroup.freeze unavailable: " + detail + "|cgroup.freeze unavailable: " + detail + "|" + detail);
  } else {
    EXPECT_EQ(r.reason, "||" + detail);
  }
  EXPECT_EQ(r.exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SupervisorTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});

// ---- the verification gate, with a launcher that skips a step ----------

#ifdef OARBANK_AGENT_FAULTY
struct CliRun {
  int status = -1;
  nlohmann::json result;
  std::string raw;
};

// `oarbank-agent-faulty run --json` as `uid`, with OARBANK_FAULT_SKIP_STEP.
CliRun RunFaultyAgent(uid_t uid, const std::string& policy, const std::string& skip, const std::string& command) {
  const auto child = ExecInChild(
      {OARBANK_AGENT_FAULTY, "run", "--unproven", "--json", policy, "--", "/bin/sh", "-c", command}, uid, [&] {
        if (skip.empty())
          unsetenv("OARBANK_FAULT_SKIP_STEP");
        else
          setenv("OARBANK_FAULT_SKIP_STEP", skip.c_str(), 1);
      });
  CliRun run;
  run.raw = child.text;
  run.status = child.status;
  run.result = nlohmann::json::parse(run.raw, nullptr, false);
  return run;
}

class GateTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    if (GetParam() != getuid() && getuid() != 0) GTEST_SKIP() << "switching to uid " << GetParam() << " needs root";
    const auto a = cage::CheckAvailability();
    if (!a.available) GTEST_SKIP() << "the cage is not available here: " << a.reason;
    policy_ = tree_.Path("policy.json");
    tree_.Write("policy.json", tree_.RunnerJson(), 0644);
  }
  TempTree tree_;
  std::string policy_;
};

TEST_P(GateTest, ALauncherThatSkippedAStepIsKilledBeforeExec) {
  const std::string marker = tree_.Path("work/ran");
  const std::string command = "touch " + marker;
  // Positive control: the faulty build with no fault runs the module.
  const CliRun ok = RunFaultyAgent(GetParam(), policy_, "", command);
  ASSERT_FALSE(ok.result.is_discarded()) << ok.raw;
  EXPECT_EQ(ok.result["fault"], "none") << ok.raw;
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);

  // A core limit the launcher would inherit and must lower: a hard limit
  // already 0 here would let a skipped no-core-dumps step pass unseen.
  const rlimit core_allowed{0, RLIM_INFINITY};
  if (getuid() == 0) {
    ASSERT_EQ(setrlimit(RLIMIT_CORE, &core_allowed), 0) << strerror(errno);
  }

  // Each skipped step, and what refuses the launcher before its exec.
  const std::pair<const char*, std::string> cases[] = {
      // The gate reads Seccomp 0 in /proc/<pid>/status.
      {"seccomp", "gate: the launcher is not confined: Seccomp is 0 (want 2: a filter)"},
      // In its user namespace the launcher holds every capability until
      // this step drops them: the gate reads CapEff (the full set).
      {"drop-capabilities", "gate: the launcher is not confined: CapEff is "},
      // The gate reads /proc/<pid>/mountinfo: / is not read-only.
      {"mount-namespace", "gate: the launcher is not confined: / is not mounted read-only"},
      // The gate reads mountinfo: the job's /dev/pts is the host's (read-only).
      {"job-devices", "gate: the launcher is not confined: /dev/pts is not the job's own"},
      // The gate reads the launcher's limits with prlimit(2).
      {"no-core-dumps", "gate: the launcher is not confined: RLIMIT_CORE is "},
      // Without no_new_privs the kernel itself refuses Landlock (and seccomp)
      // to a process without CAP_SYS_ADMIN: the launcher stops there.
      {"no-new-privs", std::string("landlock: restrict_self : ") + strerror(EPERM)},
  };
  for (const auto& [step, reason_prefix] : cases) {
    const CliRun run = RunFaultyAgent(GetParam(), policy_, step, command);
    ASSERT_FALSE(run.result.is_discarded()) << step << ": " << run.raw;
    EXPECT_EQ(run.result["refused"], true) << step;
    EXPECT_EQ(run.result["fault"], "refused") << step;
    const std::string reason = run.result["reason"];
    EXPECT_EQ(reason.substr(0, reason_prefix.size()), reason_prefix) << step << ": " << reason;
    EXPECT_EQ(WIFEXITED(run.status) ? WEXITSTATUS(run.status) : -1, kExitNotEnforced) << step;
    EXPECT_FALSE(std::filesystem::exists(marker)) << step << ": the module ran";
  }
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, GateTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});
#endif

// ---- the CLI: `oarbank-agent run` and `sandbox-exec --gate-fd` ---------

struct Spawned {
  int status = -1;
  std::string out, err;
};

// Runs argv (stdout and stderr captured); `gate` (if >= 0) becomes fd 3.
Spawned Spawn(const std::vector<std::string>& argv, int gate = -1,
              const std::function<void(pid_t)>& meanwhile = nullptr) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) abort();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (gate >= 0) dup2(gate, 3);  // dup2 clears close-on-exec
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (meanwhile) meanwhile(pid);
  Spawned s;
  s.out = ReadAll(out[0]);
  s.err = ReadAll(err[0]);
  close(out[0]);
  close(err[0]);
  waitpid(pid, &s.status, 0);
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

// ---- pure parts ----------------------------------------------------------

constexpr char kConfinedStatus[] =
    "Name:\tsh\nPPid:\t42\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
    "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

TEST(GateReadingTest, AConfinedLauncherPasses) {
  EXPECT_EQ(CheckGateReading(ParseProcStatus(kConfinedStatus), 42), std::nullopt);
}

TEST(GateReadingTest, EachMissingStepIsNamed) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = kConfinedStatus;
    s.replace(s.find(from), from.size(), to);
    return ParseProcStatus(s);
  };
  EXPECT_EQ(CheckGateReading(with("NoNewPrivs:\t1", "NoNewPrivs:\t0"), 42), "NoNewPrivs is 0 (want 1)");
  EXPECT_EQ(CheckGateReading(with("Seccomp:\t2", "Seccomp:\t0"), 42), "Seccomp is 0 (want 2: a filter)");
  EXPECT_EQ(CheckGateReading(with("Seccomp_filters:\t1", "Seccomp_filters:\t0"), 42),
            "Seccomp_filters is 0 (want at least 1)");
  EXPECT_EQ(CheckGateReading(with("Seccomp_filters:\t1\n", ""), 42), "Seccomp_filters is absent (want at least 1)");
  EXPECT_EQ(CheckGateReading(with("CapEff:\t0000000000000000", "CapEff:\t0000000000200000"), 42),
            "CapEff is 0000000000200000 (want 0)");
  // capset could raise a permitted capability again: CapPrm must be empty too.
  EXPECT_EQ(CheckGateReading(with("CapPrm:\t0000000000000000", "CapPrm:\t0000000000000001"), 42),
            "CapPrm is 0000000000000001 (want 0)");
  EXPECT_EQ(CheckGateReading(with("CapAmb:\t0000000000000000", "CapAmb:\t0000000000000400"), 42),
            "CapAmb is 0000000000000400 (want 0)");
  // A recycled pid: another parent.
  EXPECT_EQ(CheckGateReading(ParseProcStatus(kConfinedStatus), 43), "PPid is 42, not the job's init 43");
  EXPECT_EQ(CheckGateReading(ParseProcStatus(""), 43), "PPid is absent, not the job's init 43");
}

TEST(GateReadingTest, WritableGrantsMustBeMountedNoexec) {
  const std::string info =
      "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
      "90 22 8:1 /srv/w /srv/w rw,relatime - ext4 /dev/vda rw\n"
      "91 90 8:1 /srv/w /srv/w rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda rw\n"
      "92 22 8:1 /srv/a\\040b /srv/a\\040b rw,noexec - ext4 /dev/vda rw\n";
  EXPECT_EQ(CheckNoexecMounts(info, {"/srv/w", "/srv/a b"}), std::nullopt);
  EXPECT_EQ(CheckNoexecMounts(info, {"/srv/w", "/srv/x"}), "/srv/x");
  // The last mount on a path wins: a later exec mount over the noexec one.
  EXPECT_EQ(CheckNoexecMounts(info + "93 91 8:1 /srv/w /srv/w rw - ext4 /dev/vda rw\n", {"/srv/w"}), "/srv/w");
}

TEST(GateReadingTest, ARootJobsEtcMustBeIdmapped) {
  const std::string info = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n";
  EXPECT_EQ(CheckMountOption(info, {"/etc"}, "idmapped"), "/etc");
  EXPECT_EQ(CheckMountOption(info + "42 22 8:1 /etc /etc ro,nosuid,nodev,relatime,idmapped - ext4 /dev/vda rw\n",
                             {"/etc"}, "idmapped"),
            std::nullopt);
}

TEST(AvailabilityTest, RefusedUserNamespacesAreSaidAndNeverFallenBackFrom) {
  HostFacts host = testing::FakeHost(7);
  EXPECT_TRUE(cage::AssessAvailability(host, true, "available").available);
  host.user_namespaces = false;
  host.user_namespaces_detail = "kernel.unprivileged_userns_clone is 0";
  const auto a = cage::AssessAvailability(host, true, "available");
  EXPECT_FALSE(a.available);
  // The launcher's own table also loses exec_writable.deny without them.
  EXPECT_NE(a.reason.find("user namespaces: kernel.unprivileged_userns_clone is 0"), std::string::npos) << a.reason;
  host.user_namespaces = true;
  const auto b = cage::AssessAvailability(host, false, "clone(...): Operation not permitted");
  EXPECT_FALSE(b.available);
  EXPECT_EQ(b.reason, "namespaces: clone(...): Operation not permitted");
  EXPECT_FALSE(cage::AssessAvailability(testing::FakeHost(0), true, "available").available);
}

TEST(AvailabilityTest, ThisHostSaysWhatItCanDo) {
  const auto a = cage::CheckAvailability();
  const HostFacts host = ProbeHost();
  // The gate and the report agree, and a negative answer always says why.
  EXPECT_EQ(a.available, cage::SupervisorReport(host)["available"].get<bool>());
  if (!a.available) {
    EXPECT_FALSE(a.reason.empty());
    EXPECT_FALSE(cage::Available());
  }
}

// Available() is Run(Spec)'s answer: the cage, and the Spec's class proven.
TEST(AvailabilityTest, AvailableNeedsTheSpecClassProven) {
  if (!cage::CheckAvailability().available) GTEST_SKIP() << "the cage is not available here";
  TempTree tree;
  const std::string path = tree.Path("attestation.json");
  setenv("OARBANK_BATTERY_ATTESTATION", path.c_str(), 1);
  auto a = cage::CheckAvailability();
  EXPECT_FALSE(a.attested);
  EXPECT_NE(a.proof_detail.find("no battery attestation"), std::string::npos) << a.proof_detail;
  EXPECT_FALSE(cage::Available());
  Attestation att;
  att.binding = BindingForThisProcess(ProbeHost());
  att.proven_classes = {PolicyClass(cage::PolicyForSpec(cage::Spec{}).value())};
  ASSERT_EQ(WriteAttestation(path, att), "");
  a = cage::CheckAvailability();
  EXPECT_TRUE(a.attested) << a.proof_detail;
  EXPECT_EQ(a.proven_classes, att.proven_classes);
  EXPECT_TRUE(cage::Available());
  unsetenv("OARBANK_BATTERY_ATTESTATION");
}

TEST(NamespacePlanTest, NetNoneGetsAnEmptyNetworkNamespace) {
  TempTree tree;
  EXPECT_EQ(PlanJobNamespaces(tree.Runner()).Names(), "user,pid,ipc,uts,mnt,net");
  const NamespacePlan egress = PlanJobNamespaces(tree.Runner(R"("net": {"mode": "egress-allowlist",
                                                            "allow": ["a.example"], "proxy_port": 3128})"));
  EXPECT_EQ(egress.Names(), "user,pid,ipc,uts,mnt,net");
  EXPECT_TRUE(egress.egress_listener);
  EXPECT_NE(egress.net_detail.find("127.0.0.1:3128"), std::string::npos) << egress.net_detail;
  EXPECT_FALSE(PlanJobNamespaces(tree.Runner()).egress_listener);
  EXPECT_EQ(PlanIdMaps(1000, 1000, std::nullopt, std::nullopt).uid_map, "1000 1000 1\n");
  EXPECT_TRUE(PlanIdMaps(1000, 1000, std::nullopt, std::nullopt).deny_setgroups);
  EXPECT_EQ(PlanIdMaps(0, 0, kNobody, kNobody).uid_map, "0 0 1\n65534 65534 1\n");
  EXPECT_EQ(PlanIdMaps(1000, 1000, kNobody, kNobody).uid_map, "1000 1000 1\n");  // unprivileged: itself only
}

// ---- in the test process itself: nothing accumulates --------------------

size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(SupervisorLeakTest, RepeatedAndConcurrentRunsLeaveNothing) {
  const auto a = cage::CheckAvailability();
  if (!a.available) GTEST_SKIP() << "the cage is not available here: " << a.reason;
  TempTree tree;
  const Policy policy = tree.Runner();
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree.Path("work");
  ASSERT_EQ(cage::RunPolicy(policy, {"/bin/true"}, o).exit_code, 0);  // warm caches
  const size_t fds = OpenFds();
  // scripts/soak.sh raises this.
  const int runs = getenv("OARBANK_SOAK_RUNS") ? atoi(getenv("OARBANK_SOAK_RUNS")) : 30;
  for (int i = 0; i < runs; ++i) {
    const auto r = cage::RunPolicy(policy, {"/bin/sh", "-c", "exit " + std::to_string(i % 3)}, o);
    ASSERT_EQ(r.exit_code, i % 3) << r.reason;
  }
  // Threads: the agent may run jobs from several at once.
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) good += cage::RunPolicy(policy, {"/bin/echo", "hi"}, o).stdout_text == "hi\n";
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(good, 20);
  EXPECT_EQ(OpenFds(), fds);
  EXPECT_TRUE(waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) << "a child was left unreaped";
  const CgroupDelegation d = DetectCgroupDelegation(ProbeHost().cgroup);
  if (d.usable) {
    for (const auto& e : std::filesystem::directory_iterator(d.base))
      EXPECT_EQ(e.path().filename().string().rfind("oarbank-job-" + std::to_string(getpid()) + "-", 0),
                std::string::npos)
          << "left behind: " << e.path();
  }
}

}  // namespace
}  // namespace oarbank
