// The process container's cgroup v2 leaf, for real. These tests need a
// cgroup v2 subtree delegated to this process (root's own cgroup on a pure
// or hybrid cgroup2 host, or a systemd Delegate=yes unit); the memory.max
// and cpu.max ones also need the memory and cpu controllers there. This
// host's hybrid cgroup2 (/sys/fs/cgroup/unified) has neither controller: those
// tests skip here, saying why, and run in a QEMU guest with a pure cgroup2
// (scripts/guest-init.sh gives its root +memory +cpu +pids), where the
// inverse test, "hard limits without the controllers are refused", skips.
#include "sandbox/supervise/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "sandbox/supervise/namespaces.h"
#include "sandbox/supervise/supervisor.h"
#include "sandbox/testing/child.h"
#include "sandbox/testing/test_util.h"

namespace {

// The job this test binary becomes when the supervisor runs it with
// OARBANK_CGROUP_TEST_HELPER set (its environment is built: only named
// variables reach it). "alloc:MiB" touches that much memory; "spin:ms"
// burns the CPU for that long and prints the CPU milliseconds it got.
__attribute__((constructor)) void CgroupTestHelper() {
  const char* helper = getenv("OARBANK_CGROUP_TEST_HELPER");
  if (helper == nullptr) return;
  const long n = atol(strchr(helper, ':') ? strchr(helper, ':') + 1 : "0");
  if (strncmp(helper, "alloc:", 6) == 0) {
    const size_t size = static_cast<size_t>(n) << 20;
    char* p = static_cast<char*>(malloc(size));
    if (p == nullptr) _exit(2);
    for (size_t i = 0; i < size; i += 4096) p[i] = 1;
    printf("allocated %ld MiB\n", n);
    fflush(stdout);
    _exit(0);
  }
  if (strncmp(helper, "spin:", 5) == 0) {
    auto ms = [](clockid_t clock) {
      timespec ts{};
      clock_gettime(clock, &ts);
      return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
    };
    const double wall0 = ms(CLOCK_MONOTONIC), cpu0 = ms(CLOCK_PROCESS_CPUTIME_ID);
    while (ms(CLOCK_MONOTONIC) - wall0 < n) {
    }
    printf("%.0f %.0f\n", ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0, ms(CLOCK_MONOTONIC) - wall0);
    fflush(stdout);
    _exit(0);
  }
  _exit(3);
}

}  // namespace

namespace oarbank {
namespace {

using testing::Eventually;
using testing::TempTree;
using testing::UnprovenOptions;
using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

// The cgroup v2 line ("0::/path") of a /proc/<pid>/cgroup text.
std::string V2Line(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line + "\n";
  return "";
}

std::string Exe() { return std::filesystem::read_symlink("/proc/self/exe"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = ProbeHost();
    delegation_ = DetectCgroupDelegation(host_.cgroup);
    if (!delegation_.usable) GTEST_SKIP() << "no delegated cgroup v2 subtree here: " << delegation_.detail;
  }

  // Why a supervised run cannot happen here, or "" (the leaf itself needs no cage).
  static std::string CageMissing() {
    const auto a = cage::CheckAvailability();
    return a.available ? "" : "the cage is not available here: " + a.reason;
  }

  // Why a test of `name` cannot run here, or "".
  std::string MissingController(bool present, const char* name) {
    if (present) return "";
    std::string offered = ReadFile(delegation_.base + "/cgroup.controllers");
    if (!offered.empty() && offered.back() == '\n') offered.pop_back();
    return std::string("the ") + name + " controller is not offered by " + delegation_.base +
           " (cgroup.controllers: \"" + offered + "\"); this runs in a guest with a pure cgroup2";
  }

  // A runner policy that may execute this test binary (the helper).
  Policy HelperPolicy(const std::string& limits = "") {
    std::string extra = R"("tools": [{"id": "test", "paths": [")" + Exe() + R"("]}])";
    if (!limits.empty()) extra += ", " + limits;
    return tree_.Runner(extra);
  }

  cage::RunOptions Options(const std::string& helper) {
    cage::RunOptions o = UnprovenOptions();
    o.cwd = tree_.Path("work");
    o.env["OARBANK_CGROUP_TEST_HELPER"] = helper;
    return o;
  }

  HostFacts host_;
  CgroupDelegation delegation_;
  TempTree tree_;
};

TEST_F(CgroupTest, TheJobRunsInItsOwnLeafWhichIsGoneAfterwards) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree_.Path("work");
  const auto r = cage::RunPolicy(tree_.Runner(), {"/bin/cat", "/proc/self/cgroup"}, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  ASSERT_FALSE(r.container.cgroup.empty());
  EXPECT_EQ(V2Line(r.stdout_text), CgroupProcLine(host_.cgroup, r.container.cgroup) + "\n");
  EXPECT_EQ(r.container.cgroup.rfind(delegation_.base + "/oarbank-job-" + std::to_string(getpid()) + "-", 0), 0u);
  EXPECT_FALSE(std::filesystem::exists(r.container.cgroup));
  // Positive control: this process is elsewhere.
  EXPECT_NE(ReadFile("/proc/self/cgroup").find("0::"), std::string::npos);
  EXPECT_EQ(ReadFile("/proc/self/cgroup").find("oarbank-job-"), std::string::npos);
}

// Prepare names the leaf and makes nothing (the keeper makes it, once its
// parent-death signal is armed); Make makes it; a Make that fails leaves
// no directory behind.
TEST_F(CgroupTest, PrepareMakesNothingAndMakeMakesTheLeaf) {
  auto leaf = CgroupLeaf::Prepare(delegation_, {});
  ASSERT_TRUE(leaf.ok()) << leaf.error().what;
  EXPECT_FALSE(std::filesystem::exists(leaf.value().path()));
  const char* field = "";
  const char* file = "";
  ASSERT_EQ(leaf.value().Make(&field, &file), 0);
  EXPECT_TRUE(std::filesystem::is_directory(leaf.value().path()));
  EXPECT_EQ(leaf.value().Make(&field, &file), EEXIST);  // never a second job in one leaf
  EXPECT_STREQ(field, "process.container");
  EXPECT_STREQ(file, "");
  EXPECT_EQ(leaf.value().Remove(), 0);
  EXPECT_FALSE(std::filesystem::exists(leaf.value().path()));

  if (!delegation_.pids) {
    // pids.max is not written without the controller, and the leaf says so.
    LeafLimits limits;
    limits.pids_max = 16;
    limits.pids_available = true;  // asked for, but the delegation has no pids controller
    auto without = CgroupLeaf::Prepare(delegation_, limits);
    ASSERT_TRUE(without.ok()) << without.error().what;
    ASSERT_EQ(without.value().Make(&field, &file), 0);
    EXPECT_FALSE(std::filesystem::exists(without.value().path() + "/pids.max"));
    EXPECT_EQ(without.value().Remove(), 0);
  } else {
    LeafLimits limits;
    limits.pids_max = 16;
    limits.pids_available = true;
    auto with = CgroupLeaf::Prepare(delegation_, limits);
    ASSERT_TRUE(with.ok()) << with.error().what;
    ASSERT_EQ(with.value().Make(&field, &file), 0);
    EXPECT_EQ(ReadFile(with.value().path() + "/pids.max"), "16\n");
    EXPECT_EQ(with.value().Remove(), 0);
  }
}

// A job aborted before its init reported (the supervisor has not read the
// leaf's control files yet) is still killed through cgroup.kill where the
// leaf has one, never pid by pid. A plain directory stands for the
// delegation here, so the write is seen: cgroupfs would act on it at once.
TEST(CgroupLeafKill, AnEarlyAbortUsesCgroupKillWithoutReadingTheFeatures) {
  char tmpl[] = "/tmp/oarbank-leaf-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  CgroupDelegation fake;
  fake.usable = true;
  fake.base = base;
  auto leaf = CgroupLeaf::Prepare(fake, {});
  ASSERT_TRUE(leaf.ok()) << leaf.error().what;
  const char* field = "";
  const char* file = "";
  ASSERT_EQ(leaf.value().Make(&field, &file), 0);
  std::ofstream(leaf.value().path() + "/cgroup.kill").flush();
  EXPECT_FALSE(leaf.value().has_kill()) << "the features were not read";
  EXPECT_EQ(leaf.value().Kill(), 0);
  EXPECT_EQ(ReadFile(leaf.value().path() + "/cgroup.kill"), "1");
  std::filesystem::remove_all(base);
}

TEST_F(CgroupTest, AJobsInitIsClonedIntoItsLeafOrMovedThere) {
  // CLONE_INTO_CGROUP with the leaf's directory: the child starts there.
  // Given an fd that is no cgroup, the clone falls back to a plain one
  // (placed = false, the child in this process's cgroup), as on a kernel
  // before 5.7, and the caller moves it.
  auto leaf = CgroupLeaf::Create(delegation_, {});
  ASSERT_TRUE(leaf.ok()) << leaf.error().what;
  const int leaf_dir = open(leaf.value().path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int not_a_cgroup = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(leaf_dir, 0);
  ASSERT_GE(not_a_cgroup, 0);
  const std::string own = ReadFile("/proc/self/cgroup");
  for (const auto& [fd, expect_placed] : {std::pair{leaf_dir, true}, {not_a_cgroup, false}}) {
    int report[2];
    ASSERT_EQ(pipe(report), 0);
    bool placed = !expect_placed;
    const pid_t child = oarbank::CloneIntoNamespaces(0, fd, &placed);
    if (child == 0) {
      close(report[0]);
      const std::string mine = ReadFile("/proc/self/cgroup");
      (void)!write(report[1], mine.data(), mine.size());
      _exit(0);
    }
    ASSERT_GT(child, 0) << strerror(errno);
    close(report[1]);
    std::string seen;
    char buf[512];
    for (ssize_t n; (n = read(report[0], buf, sizeof buf)) > 0;) seen.append(buf, static_cast<size_t>(n));
    close(report[0]);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    EXPECT_EQ(placed, expect_placed);
    if (expect_placed)
      EXPECT_EQ(V2Line(seen), CgroupProcLine(host_.cgroup, leaf.value().path()) + "\n");
    else
      EXPECT_EQ(seen, own);
  }
  close(leaf_dir);
  close(not_a_cgroup);
  EXPECT_EQ(leaf.value().Remove(), 0);
}

// Forks a process that moves itself into `leaf`, starts `daemons` daemons
// there (setsid and a double fork each) and pauses; returns its pid once
// it has, or -1.
pid_t ForkIntoLeaf(const CgroupLeaf& leaf, int daemons) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (leaf.MoveProcess(getpid()) != 0) _exit(1);
    for (int i = 0; i < daemons; ++i)
      if (fork() == 0) {
        setsid();
        if (fork() == 0) {
          pause();
          _exit(0);
        }
        _exit(0);
      }
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  const bool started = pid > 0 && read(ready[0], &c, 1) == 1;
  close(ready[0]);
  return started ? pid : -1;
}

TEST_F(CgroupTest, CgroupKillTakesEveryProcessHoweverItForked) {
  // The leaf alone, without a pid namespace: daemons made with setsid and
  // a double fork are still in it, and cgroup.kill takes them all.
  auto leaf = CgroupLeaf::Create(delegation_, {});
  ASSERT_TRUE(leaf.ok()) << leaf.error().what;
  const pid_t pid = ForkIntoLeaf(leaf.value(), 3);
  ASSERT_GT(pid, 0);
  // Positive control: 4 processes (1 + 3 daemons) live in the leaf.
  EXPECT_TRUE(Eventually([&] {
    std::istringstream procs(ReadFile(leaf.value().path() + "/cgroup.procs"));
    return std::distance(std::istream_iterator<std::string>(procs), std::istream_iterator<std::string>()) == 4;
  }));
  EXPECT_TRUE(leaf.value().Populated());
  EXPECT_EQ(leaf.value().Kill(), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(Eventually([&] { return !leaf.value().Populated(); }));
  EXPECT_EQ(leaf.value().Remove(), 0);
  EXPECT_FALSE(std::filesystem::exists(leaf.value().path()));
}

TEST_F(CgroupTest, RemovingAPopulatedLeafKillsWhatIsLeftFirst) {
  // The kernel refuses rmdir on a populated leaf; Remove kills its
  // processes, waits until it is empty, then removes it.
  auto leaf = CgroupLeaf::Create(delegation_, {});
  ASSERT_TRUE(leaf.ok()) << leaf.error().what;
  const pid_t pid = ForkIntoLeaf(leaf.value(), 1);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(leaf.value().Populated());  // positive control
  ASSERT_NE(rmdir(leaf.value().path().c_str()), 0);
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(leaf.value().Remove(), 0);
  EXPECT_FALSE(std::filesystem::exists(leaf.value().path()));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // Gone already: nothing to do.
  EXPECT_EQ(leaf.value().Remove(), 0);
}

TEST_F(CgroupTest, FreezeStopsTheJobAndThawResumesIt) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  const std::string count = tree_.Path("work/count");
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree_.Path("work");
  o.timeout = 20s;
  cage::Job job =
      cage::Start(tree_.Runner(), {"/bin/sh", "-c", "i=0; while :; do i=$((i+1)); echo $i > " + count + "; done"}, o);
  ASSERT_FALSE(job.refused());
  auto value = [&] {
    std::ifstream in(count);
    long v = -1;
    in >> v;
    return v;
  };
  ASSERT_TRUE(Eventually([&] { return value() > 10; }));
  ASSERT_EQ(job.Freeze(), "");
  const long frozen = value();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(value(), frozen);  // nothing ran while frozen
  ASSERT_EQ(job.Thaw(), "");
  EXPECT_TRUE(Eventually([&] { return value() > frozen + 10; }));  // positive control: it runs again
}

TEST_F(CgroupTest, HardLimitsWithoutTheControllersAreRefused) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (delegation_.memory) GTEST_SKIP() << delegation_.base << " offers the memory controller: limits apply here";
  const std::string marker = tree_.Path("work/ran");
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree_.Path("work");
  o.hard_limits = true;
  const auto r = cage::RunPolicy(tree_.Runner(R"("limits": {"mem_gb": 1})"), {"/bin/sh", "-c", "touch " + marker}, o);
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(
      r.reason.rfind("sandbox: CAPABILITY_NOT_ENFORCED: limits.memory (memory.max needs the memory controller", 0), 0u)
      << r.reason;
  EXPECT_FALSE(std::filesystem::exists(marker));
  // Reservations (no hard limits) run.
  o.hard_limits = false;
  EXPECT_EQ(
      cage::RunPolicy(tree_.Runner(R"("limits": {"mem_gb": 1})"), {"/bin/sh", "-c", "touch " + marker}, o).exit_code,
      0);
  EXPECT_TRUE(std::filesystem::exists(marker));
}

// limits.pids under hard limits: where the pids controller is not
// delegated the job is refused, naming it, and nothing ran; without hard
// limits (or without limits.pids) it runs, pids.max reported unavailable.
TEST_F(CgroupTest, AHardPidsLimitWithoutTheControllerIsRefused) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (delegation_.pids) GTEST_SKIP() << delegation_.base << " offers the pids controller: limits.pids applies here";
  const std::string marker = tree_.Path("work/ran");
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree_.Path("work");
  o.hard_limits = true;
  const auto r = cage::RunPolicy(tree_.Runner(R"("limits": {"pids": 64})"), {"/bin/sh", "-c", "touch " + marker}, o);
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(r.reason.rfind("sandbox: CAPABILITY_NOT_ENFORCED: limits.pids (pids.max needs the pids controller", 0), 0u)
      << r.reason;
  EXPECT_FALSE(std::filesystem::exists(marker));
  // The default pids.max is not a hard limit the policy asked for.
  const auto plain = cage::RunPolicy(tree_.Runner(), {"/bin/sh", "-c", "touch " + marker}, o);
  EXPECT_EQ(plain.exit_code, 0) << plain.reason;
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
  o.hard_limits = false;
  const auto reserved =
      cage::RunPolicy(tree_.Runner(R"("limits": {"pids": 64})"), {"/bin/sh", "-c", "touch " + marker}, o);
  EXPECT_EQ(reserved.exit_code, 0) << reserved.reason;
  EXPECT_NE(reserved.container.limits.find("pids.max unavailable"), std::string::npos) << reserved.container.limits;
}

// The job's /dev/shm is a tmpfs of its own whose pages are charged to the
// job's leaf: filling it past memory.max is the job's OOM, not the host's
// memory, even with a /dev/shm larger than the limit.
TEST_F(CgroupTest, WritingTheJobsDevShmCountsAgainstMemoryMax) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (auto why = MissingController(delegation_.memory, "memory"); !why.empty()) GTEST_SKIP() << why;
  cage::RunOptions o = UnprovenOptions();
  o.cwd = tree_.Path("work");
  o.hard_limits = true;
  o.shm_max = uint64_t{256} << 20;
  const Policy policy = tree_.Runner(R"("limits": {"mem_gb": 0.0625})");  // 64 MiB
  const auto r = cage::RunPolicy(policy, {"/bin/sh", "-c", "head -c 134217728 /dev/zero > /dev/shm/fill; echo $?"}, o);
  // The kernel's OOM killer ends the job, or the write fails: either way the
  // 128 MiB did not fit under the job's 64 MiB.
  EXPECT_TRUE(r.fault == cage::Fault::kOom || (r.fault == cage::Fault::kNone && r.stdout_text != "0\n"))
      << cage::FaultName(r.fault) << ": " << r.reason << " " << r.stdout_text << r.stderr_text;
  // Positive control: below the limit it fits.
  const auto small =
      cage::RunPolicy(policy, {"/bin/sh", "-c", "head -c 16777216 /dev/zero > /dev/shm/fill; echo $?"}, o);
  EXPECT_EQ(small.fault, cage::Fault::kNone) << small.reason;
  EXPECT_EQ(small.stdout_text, "0\n");
}

TEST_F(CgroupTest, AllocatingPastMemoryMaxIsTheFaultOom) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (auto why = MissingController(delegation_.memory, "memory"); !why.empty()) GTEST_SKIP() << why;
  const Policy policy = HelperPolicy(R"("limits": {"mem_gb": 0.0625})");  // 64 MiB
  cage::RunOptions o = Options("alloc:256");
  o.hard_limits = true;
  const auto r = cage::RunPolicy(policy, {Exe()}, o);
  EXPECT_EQ(r.fault, cage::Fault::kOom) << r.reason << " " << r.stderr_text;
  EXPECT_FALSE(r.refused());
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.reason.rfind("killed by the kernel at memory.max", 0), 0u) << r.reason;
  EXPECT_EQ(r.container.limits, "memory.max=67108864");
  EXPECT_FALSE(std::filesystem::exists(r.container.cgroup));
  // Positive controls: below the limit, and the same allocation without it.
  const auto small = cage::RunPolicy(policy, {Exe()}, Options("alloc:16"));
  EXPECT_EQ(small.fault, cage::Fault::kNone) << small.reason;
  EXPECT_EQ(small.stdout_text, "allocated 16 MiB\n");
  const auto unlimited = cage::RunPolicy(policy, {Exe()}, Options("alloc:256"));
  EXPECT_EQ(unlimited.fault, cage::Fault::kNone) << unlimited.reason;
  EXPECT_EQ(unlimited.stdout_text, "allocated 256 MiB\n");
}

TEST_F(CgroupTest, CpuMaxThrottles) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (auto why = MissingController(delegation_.cpu, "cpu"); !why.empty()) GTEST_SKIP() << why;
  const Policy policy = HelperPolicy(R"("limits": {"cpus": 0.2})");
  cage::RunOptions o = Options("spin:1500");
  o.hard_limits = true;
  const auto r = cage::RunPolicy(policy, {Exe()}, o);
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.container.limits, "cpu.max=20000 100000");
  double cpu = 0, wall = 0;
  std::istringstream(r.stdout_text) >> cpu >> wall;
  ASSERT_GT(wall, 1400) << r.stdout_text;
  EXPECT_LT(cpu / wall, 0.3) << r.stdout_text;  // 0.2 of a CPU, and some slack
  // Positive control: unthrottled its share is well over twice that.
  const auto free_run = cage::RunPolicy(policy, {Exe()}, Options("spin:1500"));
  double free_cpu = 0, free_wall = 0;
  std::istringstream(free_run.stdout_text) >> free_cpu >> free_wall;
  ASSERT_GT(free_wall, 1400) << free_run.stdout_text;
  EXPECT_GT(free_cpu / free_wall, 2 * cpu / wall) << r.stdout_text << " vs " << free_run.stdout_text;
}

// systemd's delegation, made by hand: a subtree owned by uid 65534, the
// supervisor inside it as that uid. It moves itself into a leaf of its own
// when controllers must be enabled (no internal processes), and the job's
// leaf goes beside it.
TEST_F(CgroupTest, ASubtreeDelegatedToAnUnprivilegedSupervisor) {
  if (auto why = CageMissing(); !why.empty()) GTEST_SKIP() << why;
  if (getuid() != 0) GTEST_SKIP() << "making a delegated subtree needs root";
  const std::string deleg = delegation_.base + "/oarbank-test-deleg-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(deleg.c_str(), 0755), 0) << strerror(errno);
  for (const char* file : {"", "/cgroup.procs", "/cgroup.subtree_control", "/cgroup.threads"})
    ASSERT_EQ(chown((deleg + file).c_str(), kNobody, kNobody), 0) << file << ": " << strerror(errno);
  const bool limits = delegation_.memory;
  const std::string json = tree_.RunnerJson(R"("limits": {"mem_gb": 0.25})");
  const std::string work = tree_.Path("work");
  const std::string text =
      testing::RunInChild([&] {
        std::string text;
        std::ofstream(deleg + "/cgroup.procs") << getpid() << std::flush;
        if (!testing::BecomeUser(kNobody)) {
          text = "setuid failed";
        } else {
          cage::RunOptions o = UnprovenOptions();
          o.cwd = work;
          o.hard_limits = limits;
          const auto r = cage::RunPolicy(ParsePolicy(json).value(), {"/bin/cat", "/proc/self/cgroup"}, o);
          text = std::string(cage::FaultName(r.fault)) + "|" + r.reason + "|" + r.stdout_text + "|" +
                 r.container.cgroup + "|" + r.container.limits + "|" + ReadFile("/proc/self/cgroup");
        }
        return text;
      }).text;
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, '|');) parts.push_back(part);
  ASSERT_EQ(parts.size(), 6u) << text;
  EXPECT_EQ(parts[0], "none") << parts[1];
  EXPECT_EQ(parts[3].rfind(deleg + "/oarbank-job-", 0), 0u) << text;
  EXPECT_EQ(V2Line(parts[2]), CgroupProcLine(host_.cgroup, parts[3]) + "\n");
  // pids.max: the default, where this host delegates the pids controller.
  const std::string pids =
      delegation_.pids ? "pids.max=" + std::to_string(kDefaultPidsMax) : std::string("pids.max unavailable");
  EXPECT_EQ(parts[4], limits ? "memory.max=268435456 " + pids : pids);
  if (limits) {
    EXPECT_EQ(V2Line(parts[5]), CgroupProcLine(host_.cgroup, deleg + "/oarbank-supervisor") + "\n");
  }
  // Cleanup: the job's leaf is gone already; the test's own directories.
  EXPECT_FALSE(std::filesystem::exists(parts[3]));
  rmdir((deleg + "/oarbank-supervisor").c_str());
  EXPECT_EQ(rmdir(deleg.c_str()), 0) << strerror(errno);
}

TEST(CgroupPlanTest, LimitsAreWrittenOnlyAsHardLimits) {
  Limits limits;
  limits.mem_gb = 2;
  limits.cpus = 1.5;
  EXPECT_EQ(DescribeLeafLimits(PlanLeafLimits(limits, false)), "pids.max unavailable");
  EXPECT_EQ(DescribeLeafLimits(PlanLeafLimits(limits, true)),
            "memory.max=2147483648 cpu.max=150000 100000 pids.max unavailable");
  // pids.max is written whether or not the node asks for hard limits, where
  // the controller is delegated; limits.pids or the documented default.
  EXPECT_EQ(DescribeLeafLimits(PlanLeafLimits(limits, false, true)), "pids.max=4096");
  limits.pids = 64;
  EXPECT_EQ(DescribeLeafLimits(PlanLeafLimits(limits, true, true)),
            "memory.max=2147483648 cpu.max=150000 100000 pids.max=64");
  // Only a hard limit the policy names requires the controller.
  EXPECT_FALSE(PlanLeafLimits(limits, true).pids_required);
  limits.pids_set = true;
  EXPECT_TRUE(PlanLeafLimits(limits, true).pids_required);
  EXPECT_FALSE(PlanLeafLimits(limits, false).pids_required);
  limits.cpus = 0.001;  // the kernel's floor for a quota is 1 ms
  EXPECT_EQ(*PlanLeafLimits(limits, true).cpu_quota, 1000u);
}

// The launcher's probe (LaunchProbeScope) reads no cgroup fact; the full
// probe reads them on this host, mounted or not.
TEST(CgroupPlanTest, AScopedProbeLeavesTheCgroupFactsUnread) {
  const HostFacts full = ProbeHost();
  EXPECT_TRUE(full.cgroup.probed);
  const HostFacts scoped = ProbeHost(-1, {.cgroup = false, .gpu_nodes = false});
  EXPECT_FALSE(scoped.cgroup.probed);
  EXPECT_FALSE(scoped.cgroup.v2_mounted);
  EXPECT_TRUE(scoped.cgroup.own_path.empty());
  EXPECT_TRUE(scoped.gpu_nodes.empty());
  EXPECT_EQ(scoped.landlock_abi, full.landlock_abi);
  EXPECT_EQ(scoped.user_namespaces, full.user_namespaces);
}

TEST(CgroupPlanTest, DelegationIsAWritableCgroup2Subtree) {
  CgroupFacts f;
  EXPECT_EQ(DetectCgroupDelegation(f).detail, "no cgroup v2 hierarchy is mounted");
  f.v2_mounted = true;
  f.mount_point = "/sys/fs/cgroup";
  f.own_path = "/sys/fs/cgroup/user.slice/agent.service";
  EXPECT_FALSE(DetectCgroupDelegation(f).usable);
  EXPECT_EQ(DetectCgroupDelegation(f).detail, f.own_path + " is not delegated to this process (not writable)");
  f.writable = true;
  f.controllers = {"cpu", "memory", "pids"};
  auto d = DetectCgroupDelegation(f);
  EXPECT_TRUE(d.usable && d.memory && d.cpu);
  EXPECT_EQ(d.base, f.own_path);
  // After the supervisor moved itself into its own leaf, the delegation is
  // still the parent.
  f.own_path += "/oarbank-supervisor";
  EXPECT_EQ(DetectCgroupDelegation(f).base, "/sys/fs/cgroup/user.slice/agent.service");
  EXPECT_EQ(CgroupProcLine(f, "/sys/fs/cgroup/a/b"), "0::/a/b");
  EXPECT_EQ(CgroupProcLine(f, "/sys/fs/cgroup"), "0::/");
}

}  // namespace
}  // namespace oarbank
