#include "sandbox/host/host_facts.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "sandbox/common/fault_hooks.h"

namespace oarbank {
namespace {

// Restores the hook whatever the test does.
struct MissingFeature {
  explicit MissingFeature(const char* name) { fault_hooks.landlock_missing = name; }
  ~MissingFeature() { fault_hooks.landlock_missing = nullptr; }
};

TEST(LandlockFeatures, EveryFeatureOfThisKernelsAbiIsThere) {
  const HostFacts h = ProbeHost();
  if (h.landlock_kernel_abi == 0) GTEST_SKIP() << "no Landlock on this kernel";
  EXPECT_EQ(h.landlock_missing, "");
  EXPECT_EQ(h.landlock_abi, h.landlock_kernel_abi);
}

TEST(LandlockFeatures, MissingFeatureLowersTheAbi) {
  const int kernel = ProbeHost().landlock_kernel_abi;
  if (kernel < 6) GTEST_SKIP() << "the kernel's Landlock ABI is below 6";
  for (const auto& [name, abi] : {std::pair{"refer", 2}, {"tcp", 4}, {"scope_signal", 6}}) {
    MissingFeature missing(name);
    const HostFacts h = ProbeHost();
    EXPECT_EQ(h.landlock_abi, abi - 1) << name;
    EXPECT_EQ(h.landlock_kernel_abi, kernel) << name;
    EXPECT_EQ(h.landlock_missing, std::string(name) + " (ABI " + std::to_string(abi) + ")");
  }
}

TEST(LandlockFeatures, AFeatureAboveACapIsNotTried) {
  const int kernel = ProbeHost().landlock_kernel_abi;
  if (kernel < 6) GTEST_SKIP() << "the kernel's Landlock ABI is below 6";
  MissingFeature missing("scope_signal");
  const HostFacts h = ProbeHost(5);
  EXPECT_EQ(h.landlock_abi, 5);
  EXPECT_TRUE(h.landlock_capped);
  EXPECT_EQ(h.landlock_missing, "");
}

TEST(LandlockFeatures, TheWhiteoutTrialRunsOnlyWhenAsked) {
  EXPECT_EQ(ProbeHost().landlock_whiteout_needs, "");
  const HostFacts h = ProbeHost(-1, {.landlock_whiteout = true});
  if (h.landlock_kernel_abi == 0) {
    EXPECT_EQ(h.landlock_whiteout_needs, "unknown: no Landlock");
    return;
  }
  EXPECT_TRUE(h.landlock_whiteout_needs.rfind("rename make_", 0) == 0 &&
              h.landlock_whiteout_needs.find(", mknod make_") != std::string::npos)
      << h.landlock_whiteout_needs;
}

}  // namespace
}  // namespace oarbank

namespace oarbank {
namespace {

// The cgroup facts fail closed: each of the three files that decide them,
// absent, unreadable or malformed, leaves an error naming it and no fact.
class CgroupFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/oarbank-cgfacts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/cg/job");
    Write("mountinfo",
          "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
          "30 22 0:26 / " +
              dir_ + "/cg rw,nosuid - cgroup2 cgroup2 rw\n");
    Write("self", "1:name=systemd:/x\n0::/job\n");
    Write("cg/job/cgroup.controllers", "cpu memory pids\n");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ + "/" + rel) << text; }
  CgroupFacts Read() {
    CgroupFacts c;
    ReadCgroupFacts(c, dir_ + "/mountinfo", dir_ + "/self");
    return c;
  }
  static void ExpectNothing(const CgroupFacts& c, const std::string& part) {
    EXPECT_NE(c.error.find(part), std::string::npos) << c.error;
    EXPECT_TRUE(c.probed);
    EXPECT_FALSE(c.v2_mounted || c.writable || c.has_kill) << part;
    EXPECT_TRUE(c.own_path.empty() && c.controllers.empty()) << part;
  }
  std::string dir_;
};

TEST_F(CgroupFactsTest, WellFormedFilesGiveTheFacts) {
  const CgroupFacts c = Read();
  EXPECT_EQ(c.error, "");
  EXPECT_TRUE(c.v2_mounted);
  EXPECT_EQ(c.own_path, dir_ + "/cg/job");
  EXPECT_EQ(c.controllers, (std::vector<std::string>{"cpu", "memory", "pids"}));
}

TEST_F(CgroupFactsTest, NoCgroup2MountIsAFactNotAnError) {
  Write("mountinfo", "22 1 0:21 / /proc rw,nosuid - proc proc rw\n");
  const CgroupFacts c = Read();
  EXPECT_EQ(c.error, "");
  EXPECT_FALSE(c.v2_mounted);
}

TEST_F(CgroupFactsTest, EachFileAbsentUnreadableOrMalformedIsAnError) {
  for (const std::string rel : {"mountinfo", "self", "cg/job/cgroup.controllers"}) {
    SCOPED_TRACE(rel);
    const std::string path = dir_ + "/" + rel;
    std::filesystem::rename(path, path + ".kept");
    ExpectNothing(Read(), path + ": absent");
    ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);  // unreadable: never waited on
    ExpectNothing(Read(), path + ": not a regular file (a FIFO)");
    std::filesystem::remove(path);
    std::filesystem::rename(path + ".kept", path);
    EXPECT_EQ(Read().error, "");
  }
  Write("mountinfo", "22 1 0:21 / /proc rw,nosuid - proc proc rw\ngarbage\n");
  ExpectNothing(Read(), "mountinfo: line 2 is not a mountinfo line");
  Write("mountinfo", "30 22 0:26 / " + dir_ + "/cg rw - cgroup2 cgroup2 rw\n");
  Write("self", "0::/job\nno colons here\n");
  ExpectNothing(Read(), "self: line 2 is not a cgroup line");
}

// ReadCgroupFactsAt is the same reading from a mount point already known.
TEST_F(CgroupFactsTest, AKnownMountPointGivesTheSameFacts) {
  CgroupFacts at;
  ReadCgroupFactsAt(at, dir_ + "/cg", dir_ + "/self");
  const CgroupFacts c = Read();
  EXPECT_EQ(at.error, "");
  EXPECT_TRUE(at.v2_mounted);
  EXPECT_EQ(at.mount_point, c.mount_point);
  EXPECT_EQ(at.own_path, c.own_path);
  EXPECT_EQ(at.controllers, c.controllers);
  std::filesystem::remove(dir_ + "/cg/job/cgroup.controllers");
  ReadCgroupFactsAt(at, dir_ + "/cg", dir_ + "/self");
  ExpectNothing(at, "cgroup.controllers: absent");
}

// The probe asks the usual places with statfs before it reads mountinfo:
// on this host it finds what mountinfo says.
TEST(CgroupProbeTest, TheProbeAgreesWithMountinfo) {
  CgroupFacts from_mountinfo;
  ReadCgroupFacts(from_mountinfo, "/proc/self/mountinfo", "/proc/self/cgroup");
  const CgroupFacts probed = ProbeHost(-1, ProbeScope{.cgroup = true, .gpu_nodes = false}).cgroup;
  EXPECT_EQ(probed.error, from_mountinfo.error);
  EXPECT_EQ(probed.v2_mounted, from_mountinfo.v2_mounted);
  EXPECT_EQ(probed.mount_point, from_mountinfo.mount_point);
  EXPECT_EQ(probed.own_path, from_mountinfo.own_path);
  EXPECT_EQ(probed.controllers, from_mountinfo.controllers);
  EXPECT_EQ(probed.writable, from_mountinfo.writable);
  EXPECT_EQ(probed.has_kill, from_mountinfo.has_kill);
}

}  // namespace
}  // namespace oarbank
