// The syscall table (syscall_table.h) and the filters' answer above it
// (filter.h), judged on both architectures by running the programs as the
// kernel would (testing/bpf_run.h), and on this host by making the calls.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "sandbox/launch/enforce.h"
#include "sandbox/seccomp/filter.h"
#include "sandbox/seccomp/syscall_table.h"
#include "sandbox/testing/bpf_run.h"

namespace oarbank {
namespace {

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
uint32_t Errno(int err) { return SECCOMP_RET_ERRNO | static_cast<uint32_t>(err); }
uint32_t AuditArch(SeccompArch arch) { return arch == SeccompArch::kX86_64 ? SCMP_ARCH_X86_64 : SCMP_ARCH_AARCH64; }

TEST(SyscallTable, AgreesWithLibseccompWhereverLibseccompKnowsTheName) {
  for (SeccompArch arch : kSeccompArches) {
    const auto names = SyscallNames(arch);
    ASSERT_GT(names.size(), 300u) << SeccompArchName(arch);
    int known = 0;
    for (const auto& name : names) {
      const int theirs = seccomp_syscall_resolve_name_arch(AuditArch(arch), name.c_str());
      if (theirs < 0) continue;  // newer than libseccomp
      ++known;
      EXPECT_EQ(SyscallNumber(name, arch), theirs) << SeccompArchName(arch) << " " << name;
    }
    EXPECT_GT(known, 280) << SeccompArchName(arch);
  }
  // Newer than Debian 12's headers, which stop at 450.
  EXPECT_GT(HighestSyscall(SeccompArch::kX86_64), 450);
  EXPECT_EQ(SyscallNumber("read", SeccompArch::kX86_64), 0);
  EXPECT_EQ(SyscallNumber("read", SeccompArch::kAarch64), 63);
  EXPECT_EQ(SyscallNumber("open", SeccompArch::kAarch64), -1);  // arm64 has openat only
  EXPECT_EQ(SyscallNumber("no_such_syscall", SeccompArch::kX86_64), -1);
  // Only a whole name: no prefix, extension or case of one.
  for (const char* near : {"", "rea", "readx", "READ", "read ", "zzzz", "_llseek"})
    EXPECT_EQ(SyscallNumber(near, SeccompArch::kX86_64), -1) << near;
  // Every name of the table finds its own row: no two share a number.
  for (SeccompArch arch : kSeccompArches) {
    std::set<int> numbers;
    for (const auto& name : SyscallNames(arch)) {
      const int nr = SyscallNumber(name, arch);
      EXPECT_GE(nr, 0) << name;
      EXPECT_TRUE(numbers.insert(nr).second) << SeccompArchName(arch) << " " << name << " " << nr;
    }
    EXPECT_GT(numbers.size(), 300u);
  }
  EXPECT_FALSE(SyscallTableSource().empty());
}

TEST(SyscallTable, EveryRowNamesASyscallOfTheTableAndOnlyUselibAndMknodAreMissingOnArm64) {
  std::set<std::string> missing;
  for (const auto& rule : SeccompRuleTable()) {
    EXPECT_GE(SyscallNumber(rule.syscall, SeccompArch::kX86_64), 0) << rule.syscall;
    if (SyscallNumber(rule.syscall, SeccompArch::kAarch64) < 0) missing.insert(rule.syscall);
  }
  EXPECT_EQ(missing, (std::set<std::string>{"uselib", "mknod"}));
}

// Whether `rule`'s argument conditions hold for `args`, as libseccomp
// compares them (all 64 bits).
bool Holds(const SeccompRule& rule, const __u64 args[6]) {
  return std::all_of(rule.args.begin(), rule.args.end(), [&](const ArgCmp& c) {
    const uint64_t v = args[c.arg];
    switch (c.op) {
      case CmpOp::kEq: return v == c.value;
      case CmpOp::kMaskedEq: return (v & c.mask) == c.value;
      case CmpOp::kGe: return v >= c.value;
      case CmpOp::kNe: return v != c.value;
    }
    return false;
  });
}

// Every row set, for each architecture, run over random calls: above the
// table ENOSYS, a named row its errno where its arguments match, anything
// else allowed; another architecture's call and an x32 call killed.
TEST(SeccompAboveTable, PropertyOverRandomSyscallsOnBothArchitectures) {
  std::mt19937_64 rng(20261203);
  for (SeccompArch arch : kSeccompArches) {
    const int highest = HighestSyscall(arch);
    for (const auto& rows : SeccompRowSets(arch)) {
      auto compiled = CompileSeccomp(rows, arch);
      ASSERT_TRUE(compiled.ok()) << compiled.error().what;
      auto table = MakeTableProgram(rows, arch, highest);
      ASSERT_TRUE(table.ok()) << table.error().what;
      std::map<int, std::vector<const SeccompRule*>> by_number;
      for (const auto& rule : rows) by_number[SyscallNumber(rule.syscall, arch)].push_back(&rule);
      for (int i = 0; i < 4000; ++i) {
        seccomp_data d{};
        d.arch = AuditArch(arch);
        // Half the draws hit a row's syscall, with the row's values half the time.
        if (i % 2 == 0) {
          auto it = std::next(by_number.begin(), static_cast<long>(rng() % by_number.size()));
          d.nr = it->first;
          for (auto& a : d.args) a = rng() % 4 == 0 ? rng() : rng() % 64;
          const SeccompRule& r = *it->second[rng() % it->second.size()];
          for (const auto& c : r.args)
            if (rng() % 2) d.args[c.arg] = c.value;
        } else {
          d.nr = static_cast<int>(rng() % 2048);
          for (auto& a : d.args) a = rng();
        }
        uint32_t want = kAllow;
        if (d.nr > highest) {
          want = Errno(ENOSYS);
        } else if (auto it = by_number.find(d.nr); it != by_number.end()) {
          std::set<uint32_t> answers;
          for (const SeccompRule* r : it->second)
            if (Holds(*r, d.args)) answers.insert(Errno(r->err));
          if (!answers.empty()) {
            const auto got = testing::RunSeccompFilters({table.value().span(), compiled.value()}, d);
            ASSERT_TRUE(got.has_value());
            EXPECT_TRUE(answers.count(*got)) << SeccompArchName(arch) << " nr " << d.nr << " got " << std::hex << *got;
            continue;
          }
        }
        const auto got = testing::RunSeccompFilters({table.value().span(), compiled.value()}, d);
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(*got, want) << SeccompArchName(arch) << " nr " << d.nr;
      }
      // Another architecture's call, and an x32 call on x86_64: killed,
      // ahead of the ENOSYS above the table.
      seccomp_data foreign{};
      foreign.arch = arch == SeccompArch::kX86_64 ? 0x40000003 /* AUDIT_ARCH_I386 */ : 0x40000028 /* AUDIT_ARCH_ARM */;
      foreign.nr = 1;
      EXPECT_EQ(testing::RunSeccompFilters({table.value().span(), compiled.value()}, foreign), kKill);
      EXPECT_EQ(testing::RunSeccompBpf(table.value().span(), foreign), kKill);
      if (arch == SeccompArch::kX86_64) {
        seccomp_data x32{};
        x32.arch = AuditArch(arch);
        x32.nr = 0x40000000 | 39;  // x32 getpid
        EXPECT_EQ(testing::RunSeccompBpf(table.value().span(), x32), kKill);
        EXPECT_EQ(testing::RunSeccompFilters({table.value().span(), compiled.value()}, x32), kKill);
      }
    }
  }
}

// Each row of every row set, called with the values its conditions name,
// answers its errno through the table and libseccomp's programs (which a
// launch loads as one, ChainSeccomp: the test below): no row is
// lost between the table and the kernel. The mutation analysis relies on
// this for the rows no probe can reach (a syscall the kernel refuses anyway
// or does not have), which it explains instead of killing.
TEST(SeccompAboveTable, EveryRowAnswersItsErrnoInTheLoadedPrograms) {
  int unmet = 0;
  for (SeccompArch arch : kSeccompArches) {
    for (const auto& rows : SeccompRowSets(arch)) {
      auto compiled = CompileSeccomp(rows, arch);
      ASSERT_TRUE(compiled.ok()) << compiled.error().what;
      auto table = MakeTableProgram(rows, arch, HighestSyscall(arch));
      ASSERT_TRUE(table.ok()) << table.error().what;
      for (const auto& rule : rows) {
        seccomp_data d{};
        d.arch = AuditArch(arch);
        d.nr = SyscallNumber(rule.syscall, arch);
        for (const auto& c : rule.args) d.args[c.arg] = c.op == CmpOp::kNe ? c.value + 1 : c.value;
        if (!Holds(rule, d.args)) {  // conditions on one argument that no single value meets together
          ++unmet;
          continue;
        }
        std::set<uint32_t> answers;
        for (const auto& other : rows)
          if (other.syscall == rule.syscall && Holds(other, d.args)) answers.insert(Errno(other.err));
        const auto got = testing::RunSeccompFilters({table.value().span(), compiled.value()}, d);
        ASSERT_TRUE(got.has_value());
        EXPECT_TRUE(answers.count(*got)) << SeccompArchName(arch) << " " << rule.syscall << " got " << std::hex << *got;
      }
    }
  }
  EXPECT_EQ(unmet, 0);
}

// The launch loads the two programs as one (ChainSeccomp): for every number
// up to past the table's end, with the argument values every row's
// conditions name, and for another architecture's and an x32 call, the one
// program answers exactly what the two filters loaded apart answer.
TEST(SeccompAboveTable, TheChainedProgramAnswersAsTheTwoFilters) {
  for (SeccompArch arch : kSeccompArches) {
    for (const auto& rows : SeccompRowSets(arch)) {
      auto compiled = CompileSeccomp(rows, arch);
      ASSERT_TRUE(compiled.ok()) << compiled.error().what;
      auto table = MakeTableProgram(rows, arch, HighestSyscall(arch));
      ASSERT_TRUE(table.ok()) << table.error().what;
      auto chained = ChainSeccomp(table.value().span(), compiled.value());
      ASSERT_TRUE(chained.ok()) << chained.error().what;
      ASSERT_EQ(chained.value().size(), table.value().length - 1 + compiled.value().size());
      std::vector<seccomp_data> calls;
      for (int nr = 0; nr <= HighestSyscall(arch) + 64; ++nr) {
        seccomp_data d{};
        d.arch = AuditArch(arch);
        d.nr = nr;
        calls.push_back(d);
      }
      for (const auto& rule : rows) {  // the values each row's conditions name, and one past them
        for (uint64_t past : {0, 1}) {
          seccomp_data d{};
          d.arch = AuditArch(arch);
          d.nr = SyscallNumber(rule.syscall, arch);
          for (const auto& c : rule.args) d.args[c.arg] = c.value + past;
          calls.push_back(d);
        }
      }
      seccomp_data foreign{};
      foreign.arch = arch == SeccompArch::kX86_64 ? 0x40000003 /* AUDIT_ARCH_I386 */ : 0x40000028 /* AUDIT_ARCH_ARM */;
      foreign.nr = 1;
      calls.push_back(foreign);
      seccomp_data x32{};
      x32.arch = AuditArch(arch);
      x32.nr = 0x40000000 | 39;
      calls.push_back(x32);
      for (const auto& d : calls) {
        const auto apart = testing::RunSeccompFilters({table.value().span(), compiled.value()}, d);
        const auto one = testing::RunSeccompBpf(chained.value(), d);
        ASSERT_TRUE(apart.has_value() && one.has_value()) << SeccompArchName(arch) << " nr " << d.nr;
        EXPECT_EQ(*one, *apart) << SeccompArchName(arch) << " nr " << std::hex << d.nr << " arch " << d.arch;
      }
    }
  }
}

// A table program the rows cannot follow is refused, never chained into
// one that skips them.
TEST(SeccompAboveTable, ChainingRefusesATableThatDoesNotEndInItsOnlyAllow) {
  const auto rows = SeccompRowSets(NativeSeccompArch()).front();
  auto compiled = CompileSeccomp(rows, NativeSeccompArch());
  auto table = MakeTableProgram(rows, NativeSeccompArch(), HighestSyscall(NativeSeccompArch()));
  ASSERT_TRUE(compiled.ok() && table.ok());
  const std::vector<sock_filter> good(table.value().span().begin(), table.value().span().end());
  EXPECT_TRUE(ChainSeccomp(good, compiled.value()).ok());
  auto ends_killing = good;
  ends_killing.back().k = kKill;
  EXPECT_FALSE(ChainSeccomp(ends_killing, compiled.value()).ok());
  auto allows_early = good;  // an ALLOW before the end would skip the rows
  allows_early.insert(allows_early.begin() + 2, sock_filter{BPF_RET | BPF_K, 0, 0, kAllow});
  EXPECT_FALSE(ChainSeccomp(allows_early, compiled.value()).ok());
  auto returns_a = good;  // so would a return of the accumulator
  returns_a.insert(returns_a.begin() + 2, sock_filter{BPF_RET | BPF_A, 0, 0, 0});
  EXPECT_FALSE(ChainSeccomp(returns_a, compiled.value()).ok());
  EXPECT_FALSE(ChainSeccomp({}, compiled.value()).ok());
  EXPECT_FALSE(ChainSeccomp(good, {}).ok());
  const std::vector<sock_filter> too_long(BPF_MAXINSNS, sock_filter{BPF_RET | BPF_K, 0, 0, kAllow});
  auto chained = ChainSeccomp(good, too_long);
  ASSERT_FALSE(chained.ok());
  EXPECT_NE(chained.error().what.find("instructions"), std::string::npos) << chained.error().what;
}

// The launcher's seccomp step loads one filter.
TEST(SeccompAboveTable, TheLauncherLoadsOneFilter) {
  const auto rows = SeccompRowSets(NativeSeccompArch()).front();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    char status[4096] = {};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && !ApplySeccomp(rows)) {
      const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
      (void)!read(fd, status, sizeof status - 1);
    }
    (void)!write(fds[1], status, sizeof status);
    _exit(0);
  }
  close(fds[1]);
  char got[4096] = {};
  EXPECT_EQ(read(fds[0], got, sizeof got), static_cast<ssize_t>(sizeof got));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  const std::string status(got);
  EXPECT_NE(status.find("\nSeccomp:\t2\n"), std::string::npos) << status;
  if (status.find("Seccomp_filters:") != std::string::npos) {  // Linux 5.9 and later
    EXPECT_NE(status.find("\nSeccomp_filters:\t1\n"), std::string::npos) << status;
  }
}

// A row newer than libseccomp is the table program's: it answers the row's
// errno on both architectures, and libseccomp's program lets it through.
TEST(SeccompAboveTable, RowsNewerThanLibseccompAreAnsweredByTheTableProgram) {
  for (SeccompArch arch : kSeccompArches) {
    const auto rows = SeccompRowSets(arch).front();
    int newer = 0;
    for (const auto& rule : rows) {
      if (LibseccompKnows(rule, arch)) continue;
      ++newer;
      seccomp_data d{};
      d.arch = AuditArch(arch);
      d.nr = SyscallNumber(rule.syscall, arch);
      auto table = MakeTableProgram(rows, arch, HighestSyscall(arch));
      ASSERT_TRUE(table.ok());
      EXPECT_EQ(testing::RunSeccompBpf(table.value().span(), d), Errno(rule.err)) << rule.syscall;
    }
    EXPECT_GE(newer, 3) << SeccompArchName(arch);  // getxattrat, listxattrat, open_tree_attr, fchroot
  }
  // One with an argument condition cannot be taken: an error, never a row lost.
  std::vector<SeccompRule> rows = {{"fchroot", {{0, CmpOp::kEq, 3}}, EPERM, When::kAlways, "test"}};
  EXPECT_FALSE(MakeTableProgram(rows, SeccompArch::kX86_64, HighestSyscall(SeccompArch::kX86_64)).ok());
}

// errno of syscall(nr) with bad arguments, in a child under the launcher's
// seccomp step with `highest` as the table's end; -1: the child died.
int ErrnoUnder(const std::vector<SeccompRule>& rows, int highest, long nr) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int err = -2;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && !ApplySeccomp(rows, highest))
      err = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L) == -1 ? errno : 0;
    (void)!write(fds[1], &err, sizeof err);
    _exit(0);
  }
  close(fds[1]);
  int got = -1;
  if (read(fds[0], &got, sizeof got) != static_cast<ssize_t>(sizeof got)) got = -1;
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return got;
}

TEST(SeccompAboveTable, OnThisHostEveryNumberAboveTheTableAnswersEnosys) {
  const auto rows = SeccompRowSets(NativeSeccompArch()).front();
  const int highest = HighestSyscall(NativeSeccompArch());
  std::mt19937 rng(7);
  for (long nr : {static_cast<long>(highest) + 1, static_cast<long>(highest) + 2, 1000L, 4095L, 0x3fffffffL,
                  static_cast<long>(highest + 1 + rng() % 500)})
    EXPECT_EQ(ErrnoUnder(rows, highest, nr), ENOSYS) << nr;
  // cachestat (451) is newer than Debian 12's headers, which end at 450:
  // unfiltered it reaches this kernel (EBADF for fd -1); with the table
  // ending at 450, as a build made with those headers would, ENOSYS.
  if (syscall(451, -1L, 0L, 0L, 0L, 0L) == -1 && errno == ENOSYS) GTEST_SKIP() << "this kernel has no cachestat";
  std::vector<SeccompRule> older;
  for (const auto& r : rows)
    if (SyscallNumber(r.syscall, NativeSeccompArch()) <= 450) older.push_back(r);
  EXPECT_NE(ErrnoUnder(older, highest, 451), ENOSYS);
  EXPECT_EQ(ErrnoUnder(older, 450, 451), ENOSYS);
}

}  // namespace
}  // namespace oarbank
