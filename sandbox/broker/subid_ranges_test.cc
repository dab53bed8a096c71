// The subordinate id allocator (subid_ranges.h): two live jobs never share
// an id, stale leases are reclaimed, and the registry round-trips.
#include "sandbox/broker/subid_ranges.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace oarbank::broker {
namespace {

RC_GTEST_PROP(SubidRanges, TwoLiveJobsNeverShareAnId, ()) {
  // Random acquisitions by random owners, some of whom die in between.
  std::vector<SubidLease> leases;
  std::set<pid_t> alive;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    const pid_t pid = *rc::gen::inRange(1, 400);
    if (*rc::gen::inRange(0, 4) == 0) {
      alive.erase(pid);  // its owner is gone
      continue;
    }
    alive.insert(pid);
    auto lease = AllocateSubids(leases, "job-" + std::to_string(i), pid, 1,
                                [&](const SubidLease& l) { return alive.count(l.pid) > 0; });
    RC_ASSERT(lease.has_value());
    // The live leases' ranges are pairwise disjoint and inside the block.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& l : leases) {
      if (!alive.count(l.pid)) continue;
      const uint64_t lo = l.base(), hi = lo + kSubidRangeSize;
      RC_ASSERT(lo >= kSubidBlockBase);
      RC_ASSERT(hi <= uint64_t{kSubidBlockBase} + uint64_t{kSubidRanges} * kSubidRangeSize);
      RC_ASSERT(hi <= 0xffffffffull);
      for (const auto& [a, b] : ranges) RC_ASSERT(hi <= a || b <= lo);
      ranges.push_back({lo, hi});
    }
  }
}

TEST(SubidRanges, StaleLeasesAreReclaimedAndTheBlockCanFill) {
  std::vector<SubidLease> leases;
  auto all = [](const SubidLease&) { return true; };
  for (uint32_t i = 0; i < kSubidRanges; ++i) ASSERT_TRUE(AllocateSubids(leases, "j", 100 + i, 1, all));
  EXPECT_FALSE(AllocateSubids(leases, "j", 1, 1, all));
  // Slot 7's owner dies: its range is the one handed out next.
  auto lease = AllocateSubids(leases, "k", 1, 1, [](const SubidLease& l) { return l.slot != 7; });
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->slot, 7u);
  EXPECT_EQ(lease->base(), kSubidBlockBase + 7 * kSubidRangeSize);
}

TEST(SubidRanges, RegistryRoundTripsAndRefusesGarbage) {
  std::vector<SubidLease> leases = {{3, 42, 777, "job-a"}, {0, 43, 778, "X-y"}};
  auto parsed = ParseSubidRegistry(FormatSubidRegistry(leases));
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed.value().size(), 2u);
  EXPECT_EQ(parsed.value()[1].job, "X-y");
  EXPECT_EQ(parsed.value()[0].start_time, 777u);
  for (const char* bad : {"x 1 2 j\n", "1 0 2 j\n", "4096 1 2 j\n", "1 2 3\n", "1 2 3 j extra\n", "-1 2 3 j\n"})
    EXPECT_FALSE(ParseSubidRegistry(bad).ok()) << bad;
}

// An /etc of its own: passwd and group with real accounts, no subuid.
class SubidBlockTest : public ::testing::Test {
 protected:
  SubidBlockTest() {
    char tmpl[] = "/tmp/oarbank-etc-XXXXXX";
    etc_ = mkdtemp(tmpl);
    Write("passwd", "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    Write("group", "root:x:0:\nnogroup:x:65534:\n");
  }
  ~SubidBlockTest() override { std::filesystem::remove_all(etc_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(etc_ + "/" + name) << text; }
  std::string etc_;
};

TEST_F(SubidBlockTest, AFreeBlockHasNoConflict) {
  EXPECT_EQ(SubidBlockConflict(etc_), "");
  Write("subuid", "alice:100000:65536\n");
  EXPECT_EQ(SubidBlockConflict(etc_), "");
  // The host's own files parse, whatever they hold.
  const std::string host = SubidBlockConflict();
  EXPECT_EQ(host.find("cannot"), std::string::npos) << host;
}

TEST_F(SubidBlockTest, AnAccountOrARangeInTheBlockIsAConflict) {
  Write("passwd", "root:x:0:0::/root:/bin/sh\nmallory:x:" + std::to_string(kSubidBlockBase + 5) + ":0::/:/bin/sh\n");
  EXPECT_NE(SubidBlockConflict(etc_).find("mallory has id"), std::string::npos);
  Write("passwd", "root:x:0:0::/root:/bin/sh\n");
  Write("subgid", "bob:" + std::to_string(kSubidBlockBase - 10) + ":100\n");
  EXPECT_NE(SubidBlockConflict(etc_).find("bob's range"), std::string::npos);
}

// Fail closed: what cannot be read, or read as ids, never counts as free.
TEST_F(SubidBlockTest, AbsentUnreadableOrMalformedAccountFilesAreAConflict) {
  std::filesystem::remove(etc_ + "/passwd");
  EXPECT_NE(SubidBlockConflict(etc_).find("passwd: absent: cannot tell"), std::string::npos)
      << SubidBlockConflict(etc_);
  std::filesystem::create_directory(etc_ + "/passwd");  // not a regular file
  EXPECT_NE(SubidBlockConflict(etc_).find("passwd: not a regular file"), std::string::npos) << SubidBlockConflict(etc_);
  std::filesystem::remove(etc_ + "/passwd");
  mkfifo((etc_ + "/passwd").c_str(), 0644);  // never waited on
  EXPECT_NE(SubidBlockConflict(etc_).find("a FIFO"), std::string::npos) << SubidBlockConflict(etc_);
  std::filesystem::remove(etc_ + "/passwd");
  Write("passwd", "root:x:0:0::/root:/bin/sh\n+::::::\n");  // a NIS entry: its ids are elsewhere
  EXPECT_NE(SubidBlockConflict(etc_).find("line 2: no numeric id"), std::string::npos) << SubidBlockConflict(etc_);
  Write("passwd", "root:x:0:0::/root:/bin/sh\n");
  Write("group", "root:x:zero:\n");
  EXPECT_NE(SubidBlockConflict(etc_).find("group: line 1"), std::string::npos);
  Write("group", "root:x:0:\n");
  Write("subuid", "alice:100000\n");
  EXPECT_NE(SubidBlockConflict(etc_).find("subuid: line 1: not name:start:count"), std::string::npos);
  std::filesystem::remove(etc_ + "/subuid");
  std::filesystem::create_directory(etc_ + "/subuid");
  EXPECT_NE(SubidBlockConflict(etc_).find("subuid: not a regular file"), std::string::npos);
}

// A lease is freed only by what shows its owner gone; a stat that cannot be
// read or parsed keeps the range held.
TEST(SubidRanges, OnlyAGoneOwnerFreesALease) {
  const SubidLease lease{3, 4242, 777, "job"};
  auto stat = [](HostFileStatus status, const std::string& text) {
    HostFile f;
    f.status = status;
    f.text = text;
    return f;
  };
  std::string fields = "4242 (a (b) c) S";
  for (int i = 4; i <= 21; ++i) fields += " 1";
  EXPECT_TRUE(LeaseOwnerAliveFrom(stat(HostFileStatus::kRead, fields + " 777 0\n"), lease));
  EXPECT_FALSE(LeaseOwnerAliveFrom(stat(HostFileStatus::kRead, fields + " 778 0\n"), lease));  // pid reused
  EXPECT_FALSE(LeaseOwnerAliveFrom(stat(HostFileStatus::kAbsent, ""), lease));
  EXPECT_TRUE(LeaseOwnerAliveFrom(stat(HostFileStatus::kUnreadable, ""), lease));
  EXPECT_TRUE(LeaseOwnerAliveFrom(stat(HostFileStatus::kRead, "4242 (x) S 1 2"), lease));  // malformed
  std::string named = "4242 (a) Z (b) S";  // a comm that looks like a zombie's state
  for (int i = 4; i <= 21; ++i) named += " 1";
  EXPECT_TRUE(LeaseOwnerAliveFrom(stat(HostFileStatus::kRead, named + " 777 0\n"), lease));
  std::string zombie = "4242 (x) Z";
  for (int i = 4; i <= 21; ++i) zombie += " 1";
  EXPECT_FALSE(LeaseOwnerAliveFrom(stat(HostFileStatus::kRead, zombie + " 777 0\n"), lease));
}

TEST(SubidRanges, LeasesFollowTheirOwnersLife) {
  if (geteuid() != 0) GTEST_SKIP() << "the registry is a root-owned trust file";
  const std::string dir = "/tmp/obk-subid-test-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms(0700));
  const std::string registry = dir + "/ranges";
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto a = AcquireSubids(registry, "X", getpid());
  auto b = AcquireSubids(registry, "X-y", child);
  ASSERT_TRUE(a.ok()) << a.error().what;
  ASSERT_TRUE(b.ok()) << b.error().what;
  EXPECT_NE(a.value().slot, b.value().slot);
  ASSERT_EQ(LiveSubidLeases(registry).value().size(), 2u);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // The dead owner's range is not live, and is reclaimed by the next taker.
  ASSERT_EQ(LiveSubidLeases(registry).value().size(), 1u);
  auto c = AcquireSubids(registry, "Z", getpid());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().slot, b.value().slot);
  EXPECT_EQ(ReleaseSubids(registry, getpid()), "");
  EXPECT_TRUE(LiveSubidLeases(registry).value().empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oarbank::broker
