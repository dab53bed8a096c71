// Trust files (trust_file.h): read only when nobody but root (or the
// agent's uid) can have written them, written atomically and never through
// a planted link. The tests run as root and make what an unprivileged user
// could plant (files and directories of uid 65534, links, FIFOs, a 1777
// directory), and check that each is refused with a line naming it.
#include "sandbox/common/trust_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/manifest/approval.h"
#include "sandbox/manifest/tool_registry.h"

namespace oarbank {
namespace {

constexpr uid_t kNobody = 65534;

class TrustFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "making files of another uid needs root";
    char tmpl[] = "/tmp/oarbank-trust-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    chmod(root_.c_str(), 0755);
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
  std::string What(const std::string& path) {
    auto r = ReadTrustedFile(path);
    return r.ok() ? (r.value() ? "read:" + *r.value() : "missing") : r.error().what;
  }
  std::string root_;
};

TEST_F(TrustFileTest, ARootFileInRootDirectoriesIsRead) {
  EXPECT_EQ(What(Write("a.json", "{}")), "read:{}");
  EXPECT_EQ(What(root_ + "/none.json"), "missing");
  EXPECT_EQ(What(root_ + "/no-such-dir/none.json"), "missing");
}

TEST_F(TrustFileTest, AFileOfAnotherUidIsRefused) {
  const std::string path = Write("a.json", "{}");
  ASSERT_EQ(chown(path.c_str(), kNobody, kNobody), 0);
  EXPECT_NE(What(path).find("is owned by uid 65534"), std::string::npos) << What(path);
}

TEST_F(TrustFileTest, AFileOthersOrTheGroupMayWriteIsRefused) {
  EXPECT_NE(What(Write("a.json", "{}", 0666)).find("writable by others"), std::string::npos);
  EXPECT_NE(What(Write("b.json", "{}", 0664)).find("writable by its group"), std::string::npos);
}

TEST_F(TrustFileTest, ASymlinkIsRefusedEvenToATrustedFile) {
  const std::string target = Write("real.json", "{}");
  ASSERT_EQ(symlink(target.c_str(), (root_ + "/link.json").c_str()), 0);
  EXPECT_NE(What(root_ + "/link.json").find("is a symbolic link"), std::string::npos);
}

TEST_F(TrustFileTest, AHardLinkIsRefused) {
  const std::string target = Write("real.json", "{}");
  ASSERT_EQ(link(target.c_str(), (root_ + "/hard.json").c_str()), 0);
  EXPECT_NE(What(root_ + "/hard.json").find("2 hard links"), std::string::npos);
}

TEST_F(TrustFileTest, AFifoIsRefusedAtOnceNotReadForever) {
  ASSERT_EQ(mkfifo((root_ + "/fifo.json").c_str(), 0644), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NE(What(root_ + "/fifo.json").find("is not a regular file (a FIFO)"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(TrustFileTest, ADirectoryOfAnotherUidOrWritableByOthersIsRefused) {
  std::filesystem::create_directory(root_ + "/theirs");
  ASSERT_EQ(chown((root_ + "/theirs").c_str(), kNobody, kNobody), 0);
  Write("theirs/a.json", "{}");
  EXPECT_NE(What(root_ + "/theirs/a.json").find("/theirs is owned by uid 65534"), std::string::npos)
      << What(root_ + "/theirs/a.json");
  std::filesystem::create_directory(root_ + "/open");
  chmod((root_ + "/open").c_str(), 0777);
  Write("open/a.json", "{}");
  EXPECT_NE(What(root_ + "/open/a.json").find("/open is writable by others"), std::string::npos);
}

// CheckTrustedFile (the helper's and the stack's check, which does not
// read the program) judges every case as ReadTrustedFile does.
TEST_F(TrustFileTest, CheckingWithoutReadingGivesTheReadsVerdict) {
  const std::string trusted = Write("trusted", "x");
  const std::string theirs = Write("theirs", "x");
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  const std::string open = Write("open", "x", 0666);
  ASSERT_EQ(symlink(trusted.c_str(), (root_ + "/link").c_str()), 0);
  ASSERT_EQ(link(Write("linked", "x").c_str(), (root_ + "/hard").c_str()), 0);
  ASSERT_EQ(mkfifo((root_ + "/fifo").c_str(), 0644), 0);
  std::filesystem::create_directory(root_ + "/opendir");
  chmod((root_ + "/opendir").c_str(), 0777);
  Write("opendir/x", "x");
  for (const std::string name :
       {"trusted", "none", "no-such-dir/none", "theirs", "open", "link", "hard", "fifo", "opendir/x"}) {
    const std::string path = root_ + "/" + name;
    auto checked = CheckTrustedFile(path);
    const std::string verdict = checked.ok() ? (checked.value() ? "read:x" : "missing") : checked.error().what;
    EXPECT_EQ(verdict, What(path)) << name;
    const bool absent = name == "none" || name == "no-such-dir/none";
    EXPECT_EQ(verdict, name == "trusted" ? "read:x" : absent ? "missing" : verdict) << name;
    if (name != "trusted" && !absent) EXPECT_NE(verdict.find("not trusted: " + root_), std::string::npos) << verdict;
  }
}

TEST_F(TrustFileTest, ARootOwnedStickyDirectoryIsSafeForRootsFiles) {
  std::filesystem::create_directory(root_ + "/sticky");
  chmod((root_ + "/sticky").c_str(), 01777);
  EXPECT_EQ(What(Write("sticky/a.json", "{}")), "read:{}");
  // ... but not for what another user put there.
  const std::string theirs = Write("sticky/b.json", "{}");
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  EXPECT_NE(What(theirs).find("owned by uid 65534"), std::string::npos);
  // A sticky directory that another user owns is theirs to rearrange.
  std::filesystem::create_directory(root_ + "/their-sticky");
  chmod((root_ + "/their-sticky").c_str(), 01777);
  ASSERT_EQ(chown((root_ + "/their-sticky").c_str(), kNobody, kNobody), 0);
  EXPECT_NE(What(Write("their-sticky/a.json", "{}")).find("owned by uid 65534"), std::string::npos);
}

TEST_F(TrustFileTest, ASymlinkedDirectoryCountsWhereItLeads) {
  std::filesystem::create_directory(root_ + "/real");
  Write("real/a.json", "{}");
  ASSERT_EQ(symlink((root_ + "/real").c_str(), (root_ + "/via").c_str()), 0);
  EXPECT_EQ(What(root_ + "/via/a.json"), "read:{}");
  std::filesystem::create_directory(root_ + "/open");
  chmod((root_ + "/open").c_str(), 0777);
  Write("open/a.json", "{}");
  ASSERT_EQ(symlink((root_ + "/open").c_str(), (root_ + "/via-open").c_str()), 0);
  EXPECT_NE(What(root_ + "/via-open/a.json").find("writable by others"), std::string::npos);
}

TEST_F(TrustFileTest, AWriteIsAtomicWithItsModeWhateverTheUmask) {
  const mode_t old = umask(0);
  const std::string path = root_ + "/new/store.json";  // the last directory is made
  EXPECT_FALSE(WriteTrustedFile(path, "one\n").has_value());
  umask(0077);
  EXPECT_FALSE(WriteTrustedFile(path, "two\n").has_value());
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(stat((root_ + "/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(What(path), "read:two\n");
  // No temporary file is left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(root_ + "/new")) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST_F(TrustFileTest, APlantedTargetIsRefusedNotWrittenThrough) {
  std::filesystem::create_directory(root_ + "/sticky");
  chmod((root_ + "/sticky").c_str(), 01777);
  const std::string victim = Write("victim", "untouched");
  // A symlink, a hard link, a FIFO and a file of another uid at the store's name.
  ASSERT_EQ(symlink(victim.c_str(), (root_ + "/sticky/link.json").c_str()), 0);
  ASSERT_EQ(link(victim.c_str(), (root_ + "/sticky/hard.json").c_str()), 0);
  ASSERT_EQ(mkfifo((root_ + "/sticky/fifo.json").c_str(), 0644), 0);
  const std::string theirs = Write("sticky/theirs.json", "theirs");
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  for (const char* name : {"link.json", "hard.json", "fifo.json", "theirs.json"}) {
    const auto err = WriteTrustedFile(root_ + "/sticky/" + name, "written");
    ASSERT_TRUE(err.has_value()) << name;
    EXPECT_NE(err->what.find("not replaced"), std::string::npos) << err->what;
  }
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "untouched");
  // An untrusted directory is not written into at all.
  std::filesystem::create_directory(root_ + "/open");
  chmod((root_ + "/open").c_str(), 0777);
  const auto open_dir = WriteTrustedFile(root_ + "/open/store.json", "x");
  ASSERT_TRUE(open_dir.has_value());
  EXPECT_NE(open_dir->what.find("/open is writable by others"), std::string::npos) << open_dir->what;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/open/store.json"));
}

TEST_F(TrustFileTest, APlantedLockIsRefused) {
  const std::string victim = Write("victim", "untouched");
  ASSERT_EQ(symlink(victim.c_str(), (root_ + "/store.json.lock").c_str()), 0);
  auto lock = TrustLock::Acquire(root_ + "/store.json");
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.error().what.find("symbolic link"), std::string::npos) << lock.error().what;
}

// Eight processes append 50 approvals each at once: the lock keeps every one.
TEST_F(TrustFileTest, ConcurrentApprovalsLoseNoRecord) {
  const std::string store = root_ + "/approvals.json";
  constexpr int kWriters = 8, kEach = 50;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kEach; ++i) {
        ApprovalRecord r{"m" + std::to_string(w) + "-" + std::to_string(i), "1.0", "sha256:x", "op", UtcNow()};
        if (AppendApproval(store, r).has_value()) _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto records = LoadApprovals(store);
  ASSERT_TRUE(records.ok()) << records.error().what;
  EXPECT_EQ(records.value().size(), static_cast<size_t>(kWriters * kEach));
}

TEST_F(TrustFileTest, AnUntrustedApprovalsStoreIsRefused) {
  const std::string store = Write("approvals.json", R"({"approvals": []})", 0666);
  auto loaded = LoadApprovals(store);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().what.find("writable by others"), std::string::npos);
  const auto appended = AppendApproval(store, {"m", "1", "sha256:x", "op", UtcNow()});
  ASSERT_TRUE(appended.has_value());
  EXPECT_NE(appended->what.find("writable by others"), std::string::npos) << appended->what;
}

TEST_F(TrustFileTest, AnUntrustedToolRegistryIsRefused) {
  const std::string text = "[tools.sh]\nlinux = [\"/bin/sh\"]\n";
  EXPECT_TRUE(LoadToolRegistryFile(Write("tools.toml", text)).ok());
  const std::string theirs = Write("theirs.toml", text);
  ASSERT_EQ(chown(theirs.c_str(), kNobody, kNobody), 0);
  auto loaded = LoadToolRegistryFile(theirs);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().what.find("owned by uid 65534"), std::string::npos) << loaded.error().what;
  ASSERT_EQ(mkfifo((root_ + "/fifo.toml").c_str(), 0644), 0);
  auto fifo = LoadToolRegistryFile(root_ + "/fifo.toml");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().what.find("is not a regular file (a FIFO)"), std::string::npos) << fifo.error().what;
}

}  // namespace
}  // namespace oarbank
