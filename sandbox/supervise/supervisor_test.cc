// The supervisor on this kernel, for real: every job runs through
// cage::RunPolicy / cage::Run with the supervisor as root and, rootless, as
// uid 65534 (a forked test child drops to it first, so the user namespace
// is made by an unprivileged process). Each denial or fault is asserted
// exactly (a named fault, a signal, an errno's text), next to a positive
// control that shows the test can see the thing it says is absent; what
// must not survive is looked for from outside, in /proc.
#include "sandbox/supervise/supervisor_test.h"

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

TEST_P(SupervisorTest, ExitCodeAndOutputOfTheModule) {
  const auto r = Run({"/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(r.fault, cage::Fault::kNone);
  EXPECT_FALSE(r.refused());
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
  EXPECT_TRUE(r.refused());
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
  EXPECT_FALSE(r.refused());
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
  EXPECT_FALSE(r.refused());
  EXPECT_EQ(r.exit_code, kExitExecFailed);
  EXPECT_EQ(r.reason, "exec: " + tree_.Path("work/no-such-binary") + ": " + strerror(ENOENT));
}

TEST_P(SupervisorTest, RefusedIsNeverARun) {
  const std::string marker = tree_.Path("work/ran");
  cage::RunOptions floor = UnprovenOptions();
  floor.abi_floor = 99;
  const auto r = Run({"/bin/sh", "-c", "touch " + marker}, floor);
  EXPECT_TRUE(r.refused());
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
    EXPECT_TRUE(r.refused());
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

// The probe's proof copy of root's /etc view mounts once: the process's
// first job mounts it and each later one a copy its keeper made. Every root
// job of one process sees the view: the host's root-owned /etc owned by
// 65534 (without the view a root job sees it owned by 0).
TEST_P(SupervisorTest, EveryRootJobOfAProcessSeesTheEtcView) {
  if (GetParam() != 0) GTEST_SKIP() << "only a root job gets the view (uid 0 is unmapped in any other job's namespace)";
  struct stat st {};
  ASSERT_EQ(stat("/etc", &st), 0);
  if (st.st_uid != 0) GTEST_SKIP() << "this host's /etc is not root's";
  for (int job = 0; job < 3; ++job) {
    const auto r = Run({"/usr/bin/stat", "-c", "%u", "/etc"});
    ASSERT_EQ(r.fault, cage::Fault::kNone) << "job " << job << ": " << r.reason;
    EXPECT_EQ(r.stdout_text, "65534\n") << "job " << job;
  }
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
  EXPECT_FALSE(r.refused());
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
