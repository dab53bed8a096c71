// Reading strace logs and explaining denials (sandbox/explain/explain.h), on logs
// written here: strace's padded lines and escaped strings, which calls are
// the module's (after the launcher's second exec, and in what it forks
// afterwards), relative paths against the traced working directory, and a
// refusal the grants allow being the file's permissions, not the cage.
#include "sandbox/explain/explain.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/plan/plan.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

class TraceDir {
 public:
  TraceDir() {
    char tmpl[] = "/tmp/oarbank-manifest-trace-XXXXXX";
    root_ = mkdtemp(tmpl);
    for (const char* d : {"bundle", "work", "work/tmp", "data", "outside", "tools/other/bin"})
      fs::create_directories(root_ + "/" + d);
  }
  ~TraceDir() { fs::remove_all(root_); }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }
  void Log(int pid, const std::string& text) const { std::ofstream(Path("t." + std::to_string(pid))) << text; }

 private:
  std::string root_;
};

// A runner policy over the tree (with `extra` JSON members) and its plan on
// a host with Landlock ABI 7.
struct Planned {
  Policy policy;
  Plan plan;
};
std::optional<Planned> PlanRunner(const TraceDir& d, const std::string& extra = "") {
  auto policy = ParsePolicy(R"({"contract": 1, "role": "runner", "bundle": ")" + d.Path("bundle") + R"(", "work": ")" +
                            d.Path("work") + R"(", "data": ")" + d.Path("data") + R"(", "tmp": ")" +
                            d.Path("work/tmp") + "\"" + extra + "}");
  if (!policy.ok()) {
    ADD_FAILURE() << PolicyErrorLine(policy.error());
    return std::nullopt;
  }
  HostFacts host;
  host.landlock_abi = 7;
  host.seccomp_filter = true;
  host.user_namespaces = true;
  Plan plan = PlanConfinement(policy.value(), host);
  return Planned{std::move(policy).value(), std::move(plan)};
}

TEST(ParseTraceLine, ReadsPaddedLinesErrnosAndEscapedStrings) {
  auto vfork = ParseTraceLine("vfork()                                 = 19033", 1);
  ASSERT_TRUE(vfork.has_value());
  EXPECT_EQ(vfork->name, "vfork");
  EXPECT_EQ(vfork->ret, 19033);
  auto open = ParseTraceLine(
      R"(openat(AT_FDCWD</w>, "/a \"b\", c", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EACCES (Permission denied))", 1);
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->name, "openat");
  ASSERT_EQ(open->args.size(), 4u);
  EXPECT_EQ(open->args[0], "AT_FDCWD</w>");
  EXPECT_EQ(open->args[1], R"("/a \"b\", c")");
  EXPECT_EQ(open->ret, -1);
  EXPECT_EQ(open->err, "EACCES");
  auto sigsys = ParseTraceLine(
      "--- SIGSYS {si_signo=SIGSYS, si_code=SYS_SECCOMP, si_call_addr=0x1, "
      "si_syscall=__NR_read, si_arch=AUDIT_ARCH_I386} ---",
      1);
  ASSERT_TRUE(sigsys.has_value());
  EXPECT_EQ(sigsys->name, "SIGSYS");
  EXPECT_EQ(sigsys->args, (std::vector<std::string>{"__NR_read", "AUDIT_ARCH_I386"}));
  EXPECT_FALSE(ParseTraceLine("+++ exited with 0 +++", 1).has_value());
  auto exit = ParseTraceLine("exit_group(0)                           = ?", 1);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->ret, 0);
}

TEST(ReadModuleTrace, OnlyTheModulesCallsCountWithTheirWorkingDirectory) {
  TraceDir d;
  // 100 is the launcher: strace execs it, it forks a helper (101) before
  // the cage is in place, then execs the module, which forks 102.
  d.Log(100,
        "execve(\"/agent\", [\"/agent\"], 0x1 /* 1 vars */) = 0\n"
        "openat(AT_FDCWD</x>, \"/launcher-probe\", O_RDONLY) = -1 EACCES (Permission denied)\n"
        "fork()                                  = 101\n"
        "execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 vars */) = 0\n"
        "openat(AT_FDCWD<" +
            d.Path("work") +
            ">, \"/module-read\", O_RDONLY) = -1 EACCES (Permission denied)\n"
            "chdir(\"tmp\")                            = 0\n"
            "vfork()                                 = 102\n");
  d.Log(101,
        "execve(\"/helper\", [\"helper\"], 0x1 /* 1 vars */) = 0\n"
        "execve(\"/helper2\", [\"helper2\"], 0x1 /* 1 vars */) = 0\n"
        "openat(AT_FDCWD</x>, \"/helper-read\", O_RDONLY) = -1 EACCES (Permission denied)\n");
  d.Log(102, "execve(\"./written\", [\"./written\"], 0x1 /* 1 vars */) = -1 EACCES (Permission denied)\n");
  const ModuleTrace trace = ReadModuleTrace(d.Path("t"));
  EXPECT_TRUE(trace.module_ran);
  std::vector<std::string> seen;
  for (const auto& c : trace.calls)
    if (c.err == "EACCES") seen.push_back(c.name == "openat" ? c.args[1] : c.args[0]);
  EXPECT_EQ(seen, (std::vector<std::string>{"\"/module-read\"", "\"./written\""}));
  EXPECT_EQ(trace.calls.back().cwd, d.Path("work") + "/tmp");
}

TEST(ReadModuleTrace, ASupervisedJobBeginsAtTheFirstExecAcrossItsPidNamespace) {
  TraceDir d;
  // 300 is the keeper (strace -p): it clones init (1 in the job's pid
  // namespace, 301 here), which forks the launcher (2, 302), which execs
  // the module; the module forks 303. Nothing before the exec counts.
  d.Log(300,
        "openat(AT_FDCWD</>, \"/keeper-setup\", O_RDONLY) = -1 EACCES (Permission denied)\n"
        "clone3({flags=CLONE_NEWUSER|CLONE_NEWPID, exit_signal=SIGCHLD}, 88) = 301\n");
  d.Log(301,
        "openat(AT_FDCWD</>, \"/init-setup\", O_RDONLY) = -1 EACCES (Permission denied)\n"
        "vfork()                                 = 2 /* 302 in strace's PID NS */\n");
  d.Log(302,
        "openat(AT_FDCWD</>, \"/launcher-setup\", O_RDONLY) = -1 EACCES (Permission denied)\n"
        "execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 vars */) = 0\n"
        "openat(AT_FDCWD</w>, \"/module-read\", O_RDONLY) = -1 EACCES (Permission denied)\n"
        "fork()                                  = 3 /* 303 in strace's PID NS */\n");
  d.Log(303, "openat(AT_FDCWD</w>, \"child-read\", O_RDONLY) = -1 EACCES (Permission denied)\n");
  const ModuleTrace trace = ReadModuleTrace(d.Path("t"), TraceStart::kFirstExec);
  EXPECT_TRUE(trace.module_ran);
  std::vector<std::string> seen;
  for (const auto& c : trace.calls)
    if (c.err == "EACCES") seen.push_back(c.args[1]);
  EXPECT_EQ(seen, (std::vector<std::string>{"\"/module-read\"", "\"child-read\""}));
  EXPECT_EQ(trace.calls.back().cwd, "/w");
}

TEST(ReadMergedTrace, JoinsCallsAnotherProcessInterrupted) {
  // One stream (strace -f -o /proc/self/fd/N): the pid before each line,
  // a call split by another process's line.
  TraceDir d;
  std::ofstream(d.Path("merged")) << "400  clone3({flags=CLONE_NEWPID}, 88) = 401\n"
                                     "401 vfork( <unfinished ...>\n"
                                     "402 execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 vars */) = 0\n"
                                     "401 <... vfork resumed>)                 = 2 /* 402 in strace's PID NS */\n"
                                     "402 openat(AT_FDCWD</w>, \"/a\", O_RDONLY <unfinished ...>\n"
                                     "401 wait4(-1,  <unfinished ...>\n"
                                     "402 <... openat resumed>) = -1 EACCES (Permission denied)\n";
  const int fd = open(d.Path("merged").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const ModuleTrace trace = ReadMergedTrace(fd, TraceStart::kFirstExec);
  close(fd);
  EXPECT_TRUE(trace.module_ran);
  ASSERT_EQ(trace.calls.size(), 1u);
  EXPECT_EQ(trace.calls[0].name, "openat");
  EXPECT_EQ(trace.calls[0].err, "EACCES");
  EXPECT_EQ(trace.calls[0].program, "sh");
}

TEST(ReadModuleTrace, ALauncherThatNeverExecsTheModuleRanNothing) {
  TraceDir d;
  d.Log(200, "execve(\"/agent\", [\"/agent\"], 0x1 /* 1 vars */) = 0\nexit_group(70) = ?\n");
  const ModuleTrace trace = ReadModuleTrace(d.Path("t"));
  EXPECT_FALSE(trace.module_ran);
  EXPECT_TRUE(trace.calls.empty());
}

TEST(ExplainDenials, NamesTheGrantOrThatNoneCan) {
  TraceDir d;
  const auto planned = PlanRunner(d);
  ASSERT_TRUE(planned.has_value());
  const Policy& policy_value = planned->policy;
  const Plan& plan = planned->plan;
  auto manifest = ParseManifest("[module]\nname = \"m\"\nversion = \"1\"\n");
  ASSERT_TRUE(manifest.ok());
  auto registry = ParseToolRegistry("[tools.other]\nlinux = [\"" + d.Path("tools/other") + "\"]\n", "reg.toml");
  ASSERT_TRUE(registry.ok());
  ExplainContext ctx;
  ctx.manifest = &manifest.value();
  ctx.policy = &policy_value;
  ctx.plan = &plan;
  ctx.registry = &registry.value();
  ctx.homes = {"/home"};
  auto call = [&](const std::string& line) {
    auto c = ParseTraceLine(line, 1);
    EXPECT_TRUE(c.has_value()) << line;
    c->cwd = d.Path("work");
    return *c;
  };
  std::vector<Denial> others;
  const auto denials = ExplainDenials(
      {call("openat(AT_FDCWD</w>, \"" + d.Path("outside") + "/f\", O_WRONLY|O_CREAT, 0666) = -1 EACCES (x)"),
       call("openat(AT_FDCWD</w>, \"/home/u/.ssh/id\", O_RDONLY) = -1 EACCES (x)"),
       call("execve(\"" + d.Path("tools/other/bin/x") + "\", [\"x\"], 0x1) = -1 EACCES (x)"),
       call("execve(\"./mine\", [\"./mine\"], 0x1) = -1 EACCES (x)"),
       call("openat(AT_FDCWD</w>, \"" + d.Path("bundle") + "/f\", O_WRONLY) = -1 EACCES (x)"),
       call("socket(AF_INET, SOCK_STREAM, IPPROTO_IP) = -1 EPERM (x)"),
       call("listen(3<socket:[1]>, 5)                = -1 EPERM (x)"),
       call("openat(AT_FDCWD</w>, \"" + d.Path("work") + "/ro\", O_RDONLY) = -1 EACCES (x)"),
       call("openat(AT_FDCWD</w>, \"/missing\", O_RDONLY) = -1 ENOENT (x)"),
       call("chmod(\"" + d.Path("outside") + "/key\", 0644) = -1 EROFS (x)"),
       call("fchmodat(AT_FDCWD</w>, \"" + d.Path("work") + "/mine\", 0755) = -1 EROFS (x)"),
       call("write(1</dev/pts/0>, \"x\", 1) = -1 EROFS (x)")},
      ctx, &others);
  ASSERT_EQ(denials.size(), 8u);
  EXPECT_EQ(denials[0].target, d.Path("outside") + "/f");
  EXPECT_EQ(denials[0].access, "create");
  EXPECT_EQ(denials[0].grant, "");
  EXPECT_NE(denials[0].why.find("outside the module's directories"), std::string::npos);
  EXPECT_NE(denials[1].why.find("homes are never granted"), std::string::npos);
  EXPECT_EQ(denials[1].grant, "");
  EXPECT_EQ(denials[2].grant, "tools = [{ id = \"other\" }]");
  EXPECT_EQ(denials[3].target, d.Path("work") + "/mine");
  EXPECT_EQ(denials[3].grant, "exec_writable = true");
  EXPECT_NE(denials[4].why.find("read and execute only"), std::string::npos);
  EXPECT_EQ(denials[5].kind, "socket");
  EXPECT_EQ(denials[5].grant, "net = { mode = \"egress-allowlist\", allow = [\"<host>\"] }");
  EXPECT_EQ(denials[6].kind, "listen");
  EXPECT_EQ(denials[6].grant, "");
  // A mode change outside the writable grants: the cage's read-only mounts.
  EXPECT_EQ(denials[7].target, d.Path("outside") + "/key");
  EXPECT_EQ(denials[7].access, "change metadata");
  EXPECT_EQ(denials[7].denied_by, "read-only mount");
  EXPECT_NE(denials[7].why.find("outside the module's directories"), std::string::npos);
  // Reading inside work is granted: that refusal was the file's own mode.
  // EROFS inside work is the host's mount, not the cage; EROFS on no path is ignored.
  ASSERT_EQ(others.size(), 2u);
  EXPECT_EQ(others[0].denied_by, "file permissions");
  EXPECT_EQ(others[0].target, d.Path("work") + "/ro");
  EXPECT_EQ(others[1].target, d.Path("work") + "/mine");
  EXPECT_NE(others[1].why.find("read-only (not the cage)"), std::string::npos);
}

TEST(ExplainProxyRefusal, OnlyAHostTheListLacksCanBeGranted) {
  const auto listed = ExplainProxyRefusal(
      R"({"event":"egress_refused","client":"127.0.0.1","status":403,"method":"CONNECT","host":"other.test",)"
      R"("port":8443,"reason":"other.test:8443 is not in the allowlist"})",
      Speaker::kCage);
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->target, "other.test:8443");
  EXPECT_EQ(listed->grant, "--allow other.test:8443");
  const auto private_address = ExplainProxyRefusal(
      R"({"event":"egress_refused","status":403,"host":"a.test","port":443,"reason":"a.test resolves to 10.0.0.1, private"})",
      Speaker::kPolicy);
  ASSERT_TRUE(private_address.has_value());
  EXPECT_EQ(private_address->grant, "");
  EXPECT_FALSE(ExplainProxyRefusal(R"({"event":"egress_connect","host":"a.test"})", Speaker::kCage).has_value());
  EXPECT_FALSE(ExplainProxyRefusal("not json", Speaker::kCage).has_value());
}

TEST(EscapeControl, NoByteTheJobChoseReachesATerminalRaw) {
  EXPECT_EQ(EscapeControl("a\x1b[31m\nb\\c\x7f"), "a\\x1b[31m\\nb\\\\c\\x7f");
  Denial d;
  d.kind = "file";
  d.access = "read";
  d.target = "/x\ny";
  d.denied_by = "landlock";
  d.why = "w";
  EXPECT_EQ(DenialLine(d).find('\n'), std::string::npos);
}

TEST(ExplainDenials, ANonBlockingConnectEndsWithItsSoError) {
  TraceDir d;
  const auto planned = PlanRunner(d, R"(, "net": {"mode": "egress-any"})");
  ASSERT_TRUE(planned.has_value());
  const Policy& policy_value = planned->policy;
  const Plan& plan = planned->plan;
  ExplainContext ctx;
  ctx.speaker = Speaker::kPolicy;
  ctx.policy = &policy_value;
  ctx.plan = &plan;
  ctx.supervised = true;
  auto line = [](const std::string& text) { return *ParseTraceLine(text, 7); };
  const auto denials = ExplainDenials(
      {line(R"(connect(3<socket:[1]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("10.1.2.3")}, 16))"
            R"( = -1 EINPROGRESS (Operation now in progress))"),
       line("getsockopt(3<socket:[1]>, SOL_SOCKET, SO_ERROR, [ECONNREFUSED], [4]) = 0"),
       // A public address refused is not the ruleset's; one that connected is nothing.
       line(R"(connect(4<socket:[2]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("9.9.9.9")}, 16))"
            R"( = -1 EINPROGRESS (Operation now in progress))"),
       line("getsockopt(4<socket:[2]>, SOL_SOCKET, SO_ERROR, [ECONNREFUSED], [4]) = 0"),
       line(R"(connect(5<socket:[3]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("10.9.9.9")}, 16))"
            R"( = -1 EINPROGRESS (Operation now in progress))"),
       line("getsockopt(5<socket:[3]>, SOL_SOCKET, SO_ERROR, [0], [4]) = 0")},
      ctx);
  ASSERT_EQ(denials.size(), 1u);
  EXPECT_EQ(denials[0].target, "10.1.2.3:443");
  EXPECT_EQ(denials[0].err, "ECONNREFUSED");
  EXPECT_EQ(denials[0].denied_by, "egress-any ruleset");
  EXPECT_EQ(denials[0].grant, "");
}

// ipc "job": a unix socket refused is never the broker's story. Below ABI 9
// socket(AF_UNIX) is refused for want of RESOLVE_UNIX; from it a connect
// to a socket the job did not bind is Landlock's, and nothing is suggested.
TEST(ExplainDenials, TheJobsOwnUnixSocketsSayWhereTheyReach) {
  TraceDir d;
  const auto planned = PlanRunner(d, R"(, "ipc": "job")");
  ASSERT_TRUE(planned.has_value());
  ExplainContext ctx;
  ctx.speaker = Speaker::kCage;
  ctx.policy = &planned->policy;
  ctx.plan = &planned->plan;
  ctx.supervised = true;
  auto line = [](const std::string& text) { return *ParseTraceLine(text, 7); };
  const auto denials =
      ExplainDenials({line("socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = -1 EPERM (Operation not permitted)"),
                      line(R"(connect(3<socket:[1]>, {sa_family=AF_UNIX, sun_path=")" +
                           d.Path("work/.git/fsmonitor--daemon.ipc") + R"("}, 110) = -1 EACCES (Permission denied))")},
                     ctx);
  ASSERT_EQ(denials.size(), 2u);
  EXPECT_NE(denials[0].why.find("ABI 9"), std::string::npos) << denials[0].why;
  EXPECT_EQ(denials[0].why.find("broker"), std::string::npos) << denials[0].why;
  EXPECT_EQ(denials[1].denied_by, "landlock");
  EXPECT_NE(denials[1].why.find("its own processes bound"), std::string::npos) << denials[1].why;
  for (const auto& denial : denials) EXPECT_EQ(denial.grant, "") << denial.why;
}

TEST(ReadMergedTrace, WhatTheJobControlsNeverBreaksTheReader) {
  TraceDir d;
  std::ofstream(d.Path("merged"))
      // The module; a thread of it (CLONE_THREAD) and a process it hid (CLONE_UNTRACED).
      << "500 execve(\"/bin/prog\", [\"prog\"], 0x1 /* 1 vars */) = 0\n"
         "500 clone3({flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND, exit_signal=0}, 88) = 501\n"
         "500 clone(child_stack=NULL, flags=CLONE_UNTRACED|SIGCHLD) = 502\n"
         // A bad escape, a "=>" inside brackets, a call resumed under another name.
         "500 openat(AT_FDCWD</w>, \"/a\\xZZ\", O_RDONLY) = -1 EACCES (Permission denied)\n"
         "500 getsockopt(3<socket:[9]>, SOL_SOCKET, SO_PEERCRED, [16 => 12], [4]) = -1 EPERM (x)\n"
         "501 futex(0x1, FUTEX_WAIT <unfinished ...>\n"
         "501 <... execve resumed>) = 0\n"
         // A call seccomp killed: no result, then the process's end.
         "500 keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL <unfinished ...>\n"
         "500 +++ killed by SIGSYS (core dumped) +++\n";
  const int fd = open(d.Path("merged").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const ModuleTrace trace = ReadMergedTrace(fd, TraceStart::kFirstExec);
  close(fd);
  EXPECT_TRUE(trace.module_ran);
  EXPECT_TRUE(trace.untraced);
  EXPECT_FALSE(trace.cut);
  std::vector<std::string> names;
  for (const auto& c : trace.calls) names.push_back(c.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "openat"), names.end());
  const auto killed =
      std::find_if(trace.calls.begin(), trace.calls.end(), [](const TraceCall& c) { return c.name == "SIGSYS"; });
  ASSERT_NE(killed, trace.calls.end());
  EXPECT_EQ(killed->args, (std::vector<std::string>{"keyctl"}));
  // The thread's exec, resumed under a name its own unfinished call lacks, is read alone.
  EXPECT_EQ(trace.calls.back().name, "execve");
  EXPECT_EQ(trace.calls.back().tgid, 500);
  for (const auto& c : trace.calls)
    if (c.name == "getsockopt") {
      EXPECT_EQ(c.args.size(), 5u) << c.raw;
    }
}

TEST(ExplainDenials, InsideAGrantUnderAHomeIsTheJobsOwnAndTheRootIsNeverSuggested) {
  TraceDir d;
  const auto planned = PlanRunner(d);
  ASSERT_TRUE(planned.has_value());
  const Policy& policy_value = planned->policy;
  const Plan& plan = planned->plan;
  ExplainContext ctx;
  ctx.speaker = Speaker::kCage;
  ctx.policy = &policy_value;
  ctx.plan = &plan;
  ctx.homes = {d.Path("")};  // the whole tree lies in a "home"
  ctx.supervised = true;
  auto line = [](const std::string& text) { return *ParseTraceLine(text, 7); };
  const auto denials = ExplainDenials(
      {line("openat(AT_FDCWD</>, \"" + d.Path("bundle") + "/f\", O_WRONLY|O_CREAT, 0666) = -1 EROFS (x)"),
       line("mkdir(\"/newdir\", 0777) = -1 EACCES (x)")},
      ctx);
  ASSERT_EQ(denials.size(), 2u);
  EXPECT_EQ(denials[0].grant, "--writable");  // the worktree, not "a home directory"
  EXPECT_EQ(denials[1].grant, "");
  EXPECT_NE(denials[1].why.find("root directory"), std::string::npos);
}

}  // namespace
}  // namespace oarbank
