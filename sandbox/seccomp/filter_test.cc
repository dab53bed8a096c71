// The build's seccomp programs (sandbox/seccomp/filter.h): each is exactly what
// libseccomp compiles for its rows on its architecture, every plan finds
// one, rows the build did not compile are compiled at launch and still
// enforced, and every number above the syscall table answers ENOSYS, on
// x86_64 and on aarch64.
#include "sandbox/seccomp/filter.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::FakeHost;
using testing::TempTree;

bool SameProgram(std::span<const sock_filter> a, const std::vector<sock_filter>& b) {
  return a.size() == b.size() && memcmp(a.data(), b.data(), b.size() * sizeof(sock_filter)) == 0;
}

constexpr SeccompArch kNative = SeccompArch::kX86_64;

TEST(SeccompPrecompiled, EachRowSetsProgramIsWhatLibseccompCompilesForEachArchitecture) {
  for (SeccompArch arch : kSeccompArches) {
    const auto sets = SeccompRowSets(arch);
    ASSERT_GE(sets.size(), 16u);  // four conditions in the table today
    for (const auto& rows : sets) {
      auto compiled = CompileSeccomp(rows, arch);
      ASSERT_TRUE(compiled.ok()) << compiled.error().where << ": " << compiled.error().what;
      const auto built = PrecompiledSeccomp(rows, arch);
      ASSERT_FALSE(built.empty()) << SeccompRowsKey(rows, arch);
      EXPECT_TRUE(SameProgram(built, compiled.value())) << SeccompRowsKey(rows, arch);
      // And its table program is MakeTableProgram's for the table's end.
      const PrecompiledFilters all = FindPrecompiled(rows, arch);
      EXPECT_EQ(all.highest, HighestSyscall(arch));
      auto table = MakeTableProgram(rows, arch, HighestSyscall(arch));
      ASSERT_TRUE(table.ok()) << table.error().what;
      EXPECT_TRUE(all.table.size() == table.value().length &&
                  memcmp(all.table.data(), table.value().code.data(), all.table.size_bytes()) == 0)
          << SeccompRowsKey(rows, arch);
      // Another architecture's key finds another program, or none.
      for (SeccompArch other : kSeccompArches)
        if (other != arch) EXPECT_FALSE(SameProgram(PrecompiledSeccomp(rows, other), compiled.value()));
    }
  }
}

TEST(SeccompPrecompiled, EveryPlanFindsItsProgram) {
  TempTree tree;
  const std::string broker = "\"broker\": \"" + tree.MakeSocket("broker.sock") + "\"";
  const char* nets[] = {R"("net": {"mode": "none"})",
                        R"("net": {"mode": "egress-allowlist", "allow": ["api.example.org"], "proxy_port": 3128})"};
  int plans = 0;
  for (int abi : {6, 8, 9, kNewestKnownAbiNumber})
    for (const char* net : nets)
      for (const char* exec_writable : {"true", "false"})
        for (bool with_broker : {false, true}) {
          std::string extra = std::string(net) + ", \"exec_writable\": " + exec_writable;
          if (with_broker) extra += ", " + broker;
          for (SeccompArch arch : kSeccompArches) {
            HostFacts host = FakeHost(abi);
            host.arch = SeccompArchName(arch);
            const Plan plan = PlanConfinement(tree.Runner(extra), host);
            ASSERT_FALSE(plan.seccomp.empty());
            EXPECT_EQ(plan.seccomp_arch, arch);
            EXPECT_FALSE(PrecompiledSeccomp(plan.seccomp, arch).empty()) << "ABI " << abi << ": " << extra;
            ++plans;
          }
        }
  EXPECT_EQ(plans, 64);
}

TEST(SeccompPrecompiled, RowsTheBuildDidNotCompileFindNothing) {
  auto rows = SeccompRowSets(kNative).front();
  ASSERT_FALSE(PrecompiledSeccomp(rows, kNative).empty());
  auto changed = rows;
  changed.back().err = changed.back().err == EPERM ? EACCES : EPERM;
  EXPECT_TRUE(PrecompiledSeccomp(changed, kNative).empty());
  auto fewer = rows;
  fewer.erase(fewer.begin());
  EXPECT_TRUE(PrecompiledSeccomp(fewer, kNative).empty());
  EXPECT_NE(SeccompRowsKey(rows, kNative), SeccompRowsKey(changed, kNative));
  EXPECT_NE(SeccompRowsKey(rows, kNative), SeccompRowsKey(rows, SeccompArch::kAarch64));
}

// The key names everything of a row the kernel sees, and nothing else:
// each condition's argument, operator, value and mask (hex), and the errno.
TEST(SeccompPrecompiled, TheKeyIsEachRowsSyscallConditionsAndErrno) {
  const std::vector<SeccompRule> rows = {
      {"ioctl", {{1, CmpOp::kMaskedEq, 0x5412, 0xffffffff}, {2, CmpOp::kNe, 0, 0}}, EPERM, When::kAlways, "a"},
      {"kcmp", {}, ENOSYS, When::kNetNone, "b"},
      {"socket", {{0, CmpOp::kGe, 0xffffffffffffffff, 0}}, EACCES, When::kAlways, "c"}};
  EXPECT_EQ(SeccompRowsKey(rows, SeccompArch::kX86_64),
            "arch x86_64\n"
            "ioctl errno=1 arg1:1:5412:ffffffff arg2:3:0:0\n"
            "kcmp errno=38\n"
            "socket errno=13 arg0:2:ffffffffffffffff:0\n");
  auto other_why = rows;
  other_why[0].why = "another reason";
  other_why[1].when = When::kAlways;
  EXPECT_EQ(SeccompRowsKey(other_why, SeccompArch::kX86_64), SeccompRowsKey(rows, SeccompArch::kX86_64));
}

TEST(SeccompPrecompiled, AnUnknownSyscallIsAnErrorNamingIt) {
  auto rows = SeccompRowSets(kNative).front();
  rows.push_back({"no_such_syscall", {}, EPERM, When::kAlways, "test"});
  auto compiled = CompileSeccomp(rows, kNative);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.error().where, "no_such_syscall");
  // A syscall the architecture lacks (arm64 has no uselib) is an error too:
  // the plan drops such a row with its reason, never the compiler silently.
  auto arm = SeccompRowSets(SeccompArch::kAarch64).front();
  arm.push_back({"uselib", {}, EPERM, When::kAlways, "test"});
  auto lacking = CompileSeccomp(arm, SeccompArch::kAarch64);
  ASSERT_FALSE(lacking.ok());
  EXPECT_EQ(lacking.error().where, "uselib");
  EXPECT_EQ(lacking.error().what, "no such syscall on aarch64");
}

// In a child: loads `rows` through the launcher's seccomp step and reports
// errno of listen(-1) (a row of every set) and of kcmp(self, self, 99, 0, 0).
std::pair<int, int> ErrnosUnder(const std::vector<SeccompRule>& rows) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int out[2] = {-1, -1};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && !ApplySeccomp(rows)) {
      out[0] = syscall(SYS_listen, -1, 0) == -1 ? errno : 0;
      out[1] = syscall(SYS_kcmp, getpid(), getpid(), 99, 0, 0) == -1 ? errno : 0;
    }
    (void)!write(fds[1], out, sizeof out);
    _exit(0);
  }
  close(fds[1]);
  int got[2] = {-2, -2};
  EXPECT_EQ(read(fds[0], got, sizeof got), static_cast<ssize_t>(sizeof got));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return {got[0], got[1]};
}

TEST(SeccompPrecompiled, BothPathsEnforceTheirRows) {
  const auto rows = SeccompRowSets(kNative).back();  // every condition holds: listen (ipc none) and kcmp
  auto has = [](const std::vector<SeccompRule>& r, const char* name) {
    return std::any_of(r.begin(), r.end(), [&](const SeccompRule& x) { return x.syscall == name; });
  };
  ASSERT_TRUE(has(rows, "listen") && has(rows, "kcmp"));
  // The build's program: both refused.
  EXPECT_EQ(ErrnosUnder(rows), std::make_pair(EPERM, EPERM));
  // Without the kcmp row there is no built program: compiled at launch,
  // listen still refused and kcmp reaches the kernel (EINVAL: type 99).
  auto without_kcmp = rows;
  std::erase_if(without_kcmp, [](const SeccompRule& r) { return r.syscall == "kcmp"; });
  ASSERT_TRUE(PrecompiledSeccomp(without_kcmp, kNative).empty());
  EXPECT_EQ(ErrnosUnder(without_kcmp), std::make_pair(EPERM, EINVAL));
}

}  // namespace
}  // namespace oarbank
