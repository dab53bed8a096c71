// Tests for the grant-path walk (grant_path.h) and the link-free open under
// it (open_no_symlinks.h), each both with openat2 and with the O_NOFOLLOW
// walk that stands for it where the kernel lacks it (the fault hook makes
// openat2 answer ENOSYS): every planted link refused and named, the
// system's own links followed, mount points inside a grant refused, and a
// property test on random trees of directories and links with random owners
// and modes against a reference model of the rule.
#include "sandbox/common/grant_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

// The walk under test: openat2, or the O_NOFOLLOW walk (openat2 forced to
// ENOSYS through the test-only hook).
enum class Walk { kOpenat2, kNoOpenat2 };

bool SkipOpenat2(const char* step) { return std::string(step) == "openat2"; }

class WithWalk : public ::testing::TestWithParam<Walk> {
 protected:
  void SetUp() override {
    fault_hooks.skip_step = GetParam() == Walk::kNoOpenat2 ? SkipOpenat2 : nullptr;
    char tmpl[] = "/tmp/oarbank-grant-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/a/b");
    std::ofstream(root_ + "/a/b/file") << "x";
    fs::create_directory_symlink(root_ + "/a", root_ + "/link");
    fs::create_symlink(root_ + "/a/b/file", root_ + "/a/file-link");
  }
  void TearDown() override {
    fault_hooks.skip_step = nullptr;
    fs::remove_all(root_);
  }
  int Open(const std::string& path, int flags, bool no_xdev = false) {
    const int fd = OpenNoSymlinksAt(AT_FDCWD, path.c_str(), flags, no_xdev);
    err_ = errno;
    if (fd >= 0) close(fd);
    return fd >= 0 ? 0 : err_;
  }
  std::string root_;
  int err_ = 0;
};

TEST_P(WithWalk, OpensWhatHasNoLinkAndRefusesEveryLinkWithEloop) {
  EXPECT_EQ(Open(root_ + "/a/b/file", O_PATH), 0);
  EXPECT_EQ(Open(root_ + "/a/b/file", O_RDONLY), 0);
  EXPECT_EQ(Open(root_ + "/a/./b/../b", O_PATH | O_DIRECTORY), 0);
  EXPECT_EQ(Open("/", O_PATH), 0);
  EXPECT_EQ(Open(root_ + "/link/b/file", O_PATH), ELOOP);  // a link on the way
  EXPECT_EQ(Open(root_ + "/link", O_PATH), ELOOP);         // the last component
  EXPECT_EQ(Open(root_ + "/a/file-link", O_RDONLY), ELOOP);
  EXPECT_EQ(Open(root_ + "/a/b/file/x", O_PATH), ENOTDIR);
  EXPECT_EQ(Open(root_ + "/a/b/file", O_PATH | O_DIRECTORY), ENOTDIR);
  EXPECT_EQ(Open(root_ + "/a/missing", O_PATH), ENOENT);
}

TEST_P(WithWalk, RelativeToADirectory) {
  const UniqueFd dir(open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  const UniqueFd fd(OpenNoSymlinksAt(dir.get(), "a/b/file", O_PATH));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(OpenNoSymlinksAt(dir.get(), "link/b", O_PATH), -1);
  EXPECT_EQ(errno, ELOOP);
}

TEST_P(WithWalk, BeneathNeverLeavesTheDirectory) {
  const UniqueFd dir(open((root_ + "/a").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto beneath = [&](const char* path) {
    const UniqueFd fd(OpenNoSymlinksAt(dir.get(), path, O_PATH, /*no_xdev=*/true, /*beneath=*/true));
    return fd.valid() ? 0 : errno;
  };
  EXPECT_EQ(beneath("b/file"), 0);  // positive control
  EXPECT_EQ(beneath("../a/b/file"), EXDEV);
  EXPECT_EQ(beneath("b/../../a"), EXDEV);
  EXPECT_EQ(beneath((root_ + "/a/b/file").c_str()), EXDEV);  // absolute
  EXPECT_EQ(beneath("file-link"), ELOOP);
  // Without `beneath` the same ".." is only a path (the caller's choice).
  const UniqueFd up(OpenNoSymlinksAt(dir.get(), "../a/b/file", O_PATH));
  EXPECT_TRUE(up.valid());
}

TEST_P(WithWalk, NoXdevRefusesAMountPointAndAllowsTheRest) {
  EXPECT_EQ(Open("/proc/sys", O_PATH | O_DIRECTORY, /*no_xdev=*/true), EXDEV);
  EXPECT_EQ(Open("/proc/sys", O_PATH | O_DIRECTORY), 0);  // positive control
  EXPECT_EQ(Open(root_ + "/a/b", O_PATH, /*no_xdev=*/true), Open(root_ + "/a/b", O_PATH));
}

TEST_P(WithWalk, APlantedLinkIsRefusedNamingThePathAndTheLink) {
  auto r = ResolveGrantPath(root_ + "/link/b");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().what.rfind(root_ + "/link is a symbolic link (to " + root_ + "/a), refused: ", 0), 0u)
      << r.error().what;
  auto plain = ResolveGrantPath(root_ + "/a/./b/../b//");
  ASSERT_TRUE(plain.ok()) << plain.error().what;
  EXPECT_EQ(plain.value().path, root_ + "/a/b");
  EXPECT_EQ(plain.value().type, S_IFDIR);
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(plain.value().inode, (FileId{st.st_dev, st.st_ino}));
  EXPECT_TRUE(plain.value().links.empty());
}

// A path with no link and no ".." is opened whole; one with ".." takes the
// walk. Both must land on the same canonical path, inode and type, and a
// link at the end of an otherwise plain path is still judged (and here,
// under a world-writable /tmp, refused).
TEST_P(WithWalk, APlainPathResolvesWholeToWhatTheWalkFinds) {
  for (const std::string rel : {"/a", "/a/b", "/a/b/file", "/a//b/./file", "/a/b/"}) {
    const std::string plain = root_ + rel;
    auto whole = ResolveGrantPath(plain);
    ASSERT_TRUE(whole.ok()) << plain << ": " << whole.error().what;
    const std::string canonical = fs::path(plain).lexically_normal().string();
    const std::string trimmed =
        canonical.size() > 1 && canonical.back() == '/' ? canonical.substr(0, canonical.size() - 1) : canonical;
    EXPECT_EQ(whole.value().path, trimmed);
    struct stat st {};
    ASSERT_EQ(stat(plain.c_str(), &st), 0);
    EXPECT_EQ(whole.value().inode, (FileId{st.st_dev, st.st_ino})) << plain;
    EXPECT_EQ(whole.value().type, st.st_mode & S_IFMT) << plain;
    EXPECT_TRUE(whole.value().links.empty()) << plain;
    // The same place through "..": the component walk.
    const std::string dir = trimmed.substr(0, trimmed.rfind('/'));
    const std::string through_dotdot =
        dir + "/../" + dir.substr(dir.rfind('/') + 1) + trimmed.substr(trimmed.rfind('/'));
    auto walked = ResolveGrantPath(through_dotdot);
    ASSERT_TRUE(walked.ok()) << walked.error().what;
    EXPECT_EQ(walked.value().path, whole.value().path);
    EXPECT_EQ(walked.value().inode, whole.value().inode);
    EXPECT_EQ(walked.value().type, whole.value().type);
  }
  auto root = ResolveGrantPath("/");  // no component at all
  ASSERT_TRUE(root.ok()) << root.error().what;
  struct stat root_st {};
  ASSERT_EQ(stat("/", &root_st), 0);
  EXPECT_EQ(root.value().path, "/");
  EXPECT_EQ(root.value().inode, (FileId{root_st.st_dev, root_st.st_ino}));
  EXPECT_EQ(root.value().type, S_IFDIR);
  EXPECT_TRUE(root.value().links.empty());
  auto last_link = ResolveGrantPath(root_ + "/a/file-link");
  ASSERT_FALSE(last_link.ok());
  EXPECT_EQ(
      last_link.error().what.rfind(root_ + "/a/file-link is a symbolic link (to " + root_ + "/a/b/file), refused: ", 0),
      0u)
      << last_link.error().what;
}

TEST_P(WithWalk, TheSystemsOwnLinksAreFollowedWhereNoJobWrites) {
  if (!fs::is_symlink("/lib64")) GTEST_SKIP() << "/lib64 is not a link on this host (no merged /usr)";
  auto r = ResolveGrantPath("/lib64/../lib64");
  ASSERT_TRUE(r.ok()) << r.error().what;
  EXPECT_EQ(r.value().path, fs::canonical("/lib64").string());
  EXPECT_EQ(r.value().links, std::vector<std::string>{"/lib64"});  // ".." leaves the target: /usr
  // Never inside a path the caller names.
  ResolveOptions named;
  named.named = {"/"};
  EXPECT_FALSE(ResolveGrantPath("/lib64", named).ok());
}

// A mount point two or more components deep (/dev/pts, /sys/fs/cgroup),
// as this host's mountinfo lists them.
std::string NestedMountPoint() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    if (std::count(point.begin(), point.end(), '/') >= 2 && point.find('\\') == std::string::npos &&
        ResolveGrantPath(point).ok())
      return point;
  }
  return "";
}

TEST_P(WithWalk, AMountPointInsideAGrantIsRefusedButNotAboveIt) {
  const std::string point = NestedMountPoint();
  ASSERT_FALSE(point.empty()) << "no nested mount point in /proc/self/mountinfo";
  ResolveOptions inside;
  inside.no_xdev_below = {point.substr(0, point.rfind('/'))};
  auto r = ResolveGrantPath(point, inside);
  ASSERT_FALSE(r.ok()) << point;
  EXPECT_NE(r.error().what.find("a mount point inside the grant"), std::string::npos) << r.error().what;
  EXPECT_TRUE(ResolveGrantPath(point).ok());  // positive control: the same path, no grant around it
  ResolveOptions at;
  at.no_xdev_below = {point};
  EXPECT_TRUE(ResolveGrantPath(point, at).ok()) << "the grant's own mount is not crossed inside it";
}

TEST_P(WithWalk, MissingPathsAndBadInputSayWhat) {
  EXPECT_EQ(ResolveGrantPath(root_ + "/a/missing/x").error().what,
            "no such file or directory: " + root_ + "/a/missing/x (" + root_ + "/a/missing)");
  EXPECT_EQ(ResolveGrantPath("relative").error().what, "expected an absolute path, got \"relative\"");
  EXPECT_NE(ResolveGrantPath(root_ + "/a/b/file/x").error().what.find("not a directory"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Walks, WithWalk, ::testing::Values(Walk::kOpenat2, Walk::kNoOpenat2),
                         [](const auto& info) { return info.param == Walk::kOpenat2 ? "openat2" : "no_openat2"; });

// ---- The property: random trees against a reference model ----

// One entry of a random tree below the test's root.
struct Node {
  bool link = false;
  uid_t owner = 0;
  mode_t mode = 0755;
  std::string target;  // a link's: an absolute path
};

// The rule, written again as plainly as it can be: a link is followed only
// in a judged directory (basename starting with "s", or the root itself)
// whose chain from the root down is root's alone, when the link is root's.
struct Model {
  std::string root;
  std::map<std::string, Node> nodes;  // path relative to the root ("a/s1") -> node

  static bool RootsAlone(const Node& n) { return n.owner == 0 && (n.mode & 022) == 0; }

  // The canonical relative path `raw` (relative to the root) leads to, or nothing.
  std::optional<std::string> Resolve(const std::string& raw) const {
    std::vector<std::string> pending, cur;
    Split(raw, pending);
    int links = 0;
    while (!pending.empty()) {
      const std::string name = pending.front();
      pending.erase(pending.begin());
      const std::string dir = Join(cur);
      const std::string here = dir.empty() ? name : dir + "/" + name;
      const auto it = nodes.find(here);
      if (it == nodes.end()) return std::nullopt;
      if (it->second.link) {
        const std::string base = cur.empty() ? "" : cur.back();
        if (!(cur.empty() || base[0] == 's') || !ChainAlone(cur) || it->second.owner != 0 || ++links > 40)
          return std::nullopt;
        cur.clear();
        std::vector<std::string> target;
        Split(it->second.target.substr(root.size()), target);
        pending.insert(pending.begin(), target.begin(), target.end());
        continue;
      }
      cur.push_back(name);
    }
    return Join(cur);
  }
  bool ChainAlone(const std::vector<std::string>& cur) const {
    std::string path;
    for (const auto& c : cur) {
      path = path.empty() ? c : path + "/" + c;
      if (!RootsAlone(nodes.at(path))) return false;
    }
    return true;
  }
  static void Split(const std::string& s, std::vector<std::string>& out) {
    size_t i = 0;
    while (i <= s.size()) {
      size_t j = s.find('/', i);
      if (j == std::string::npos) j = s.size();
      if (j > i) out.push_back(s.substr(i, j - i));
      i = j + 1;
    }
  }
  static std::string Join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out = out.empty() ? p : out + "/" + p;
    return out;
  }
};

std::string g_root;  // the judge's root (a plain function pointer cannot capture)

bool JudgeForTest(const std::string& dir) {
  if (dir == g_root) return true;
  if (dir.size() <= g_root.size() || dir.compare(0, g_root.size() + 1, g_root + "/") != 0) return false;
  return dir[dir.rfind('/') + 1] == 's';
}

TEST(GrantPathProperty, TheResolverGrantsExactlyWhatTheModelReaches) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the trees hold directories and links of other owners";
  // Under /run (root's, 0755): a chain from / that is root's alone, as the
  // system's directories are; /tmp is world-writable and would break it.
  char tmpl[] = "/run/oarbank-grant-prop-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  chmod(base.c_str(), 0755);
  int round = 0;
  rc::check("resolver == model", [&](bool no_openat2) {
    fault_hooks.skip_step = no_openat2 ? SkipOpenat2 : nullptr;
    Model m;
    m.root = base + "/t" + std::to_string(round++);
    g_root = m.root;
    fs::create_directory(m.root);
    std::vector<std::string> dirs{""};
    const int count = *rc::gen::inRange(1, 20);
    for (int i = 0; i < count; ++i) {
      const std::string parent = *rc::gen::elementOf(dirs);
      const std::string name = *rc::gen::elementOf(std::vector<std::string>{"s1", "s2", "d1", "d2", "x"});
      const std::string rel = parent.empty() ? name : parent + "/" + name;
      if (m.nodes.count(rel)) continue;
      Node n;
      n.link = *rc::gen::inRange(0, 2) == 0;
      n.owner = *rc::gen::elementOf(std::vector<uid_t>{0, 0, 65534});
      n.mode = *rc::gen::elementOf(std::vector<mode_t>{0755, 0755, 0775, 0777});
      const std::string path = m.root + "/" + rel;
      if (n.link) {
        const std::string to = *rc::gen::elementOf(dirs);
        n.target = to.empty() ? m.root : m.root + "/" + to;
        RC_ASSERT(symlink(n.target.c_str(), path.c_str()) == 0);
        RC_ASSERT(lchown(path.c_str(), n.owner, n.owner) == 0);
      } else {
        RC_ASSERT(mkdir(path.c_str(), n.mode) == 0);
        RC_ASSERT(chmod(path.c_str(), n.mode) == 0);
        RC_ASSERT(chown(path.c_str(), n.owner, n.owner) == 0);
        dirs.push_back(rel);
      }
      m.nodes[rel] = n;
    }
    // Every entry of the tree, and each with one more name after it.
    const std::string more = *rc::gen::elementOf(std::vector<std::string>{"s1", "s2", "d1", "d2", "x"});
    for (const auto& [entry, node] : m.nodes) {
      for (const std::string& raw : {entry, entry + "/" + more}) {
        const auto want = m.Resolve(raw);
        const auto got = ResolveGrantPathJudged(m.root + "/" + raw, {}, JudgeForTest);
        RC_ASSERT(got.ok() == want.has_value());
        if (!want) continue;
        RC_ASSERT(got.value().path == (want->empty() ? m.root : m.root + "/" + *want));
        struct stat st {};
        RC_ASSERT(stat(got.value().path.c_str(), &st) == 0);
        RC_ASSERT(got.value().inode == (FileId{st.st_dev, st.st_ino}));
      }
    }
    fault_hooks.skip_step = nullptr;
    fs::remove_all(m.root);
  });
  fault_hooks.skip_step = nullptr;
  fs::remove_all(base);
}

}  // namespace
}  // namespace oarbank
