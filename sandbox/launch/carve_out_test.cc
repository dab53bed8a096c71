// Tests for the read-only carve-outs (carve_out.h): where a worktree's
// history is found (a .git directory, a .git pointer file and the git and
// common directories it names), that every symbolic link on the way is
// refused rather than followed, and how the cage's Spec turns it into a
// policy (read_only inside writable directories, a read-only "git" tool
// outside them). The binds themselves are tested end to end, with a real
// git, in harness/test_cage.py.
#include "sandbox/launch/carve_out.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/supervise/supervisor.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

class CarveOut : public ::testing::Test {
 protected:
  void SetUp() override {
    wt_ = tree_.Path("work");
    fs::create_directories(tree_.Path("outside/sep.git/worktrees/wt"));
  }
  void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  GitCarveOuts Resolve() {
    auto r = ResolveGitCarveOuts(wt_);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().where + ": " + r.error().what);
    EXPECT_TRUE(r.ok() && r.value().has_value());
    return r.ok() && r.value() ? *r.value() : GitCarveOuts{};
  }
  Error Refused() {
    auto r = ResolveGitCarveOuts(wt_);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  }
  testing::TempTree tree_;
  std::string wt_;
};

TEST_F(CarveOut, NoGitIsNothing) {
  auto r = ResolveGitCarveOuts(wt_);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().has_value());
}

TEST_F(CarveOut, AGitDirectoryIsItsOwnGitAndCommonDirectory) {
  fs::create_directory(wt_ + "/.git");
  const GitCarveOuts g = Resolve();
  EXPECT_FALSE(g.pointer);
  EXPECT_EQ(g.dot_git, wt_ + "/.git");
  EXPECT_EQ(g.git_dir, wt_ + "/.git");
  EXPECT_EQ(g.common_dir, wt_ + "/.git");
  EXPECT_EQ(g.Paths(), std::vector<std::string>{wt_ + "/.git"});
}

TEST_F(CarveOut, APointerFileNamesTheGitDirectoryAndItsCommonDirectory) {
  // As `git worktree add` writes them: an absolute gitdir, a relative commondir.
  const std::string git_dir = tree_.Path("outside/sep.git/worktrees/wt");
  Write(wt_ + "/.git", "gitdir: " + git_dir + "\n");
  Write(git_dir + "/commondir", "../..\n");
  const GitCarveOuts g = Resolve();
  EXPECT_TRUE(g.pointer);
  EXPECT_EQ(g.dot_git, wt_ + "/.git");
  EXPECT_EQ(g.git_dir, git_dir);
  EXPECT_EQ(g.common_dir, tree_.Path("outside/sep.git"));
  EXPECT_EQ(g.Paths(), (std::vector<std::string>{wt_ + "/.git", git_dir, tree_.Path("outside/sep.git")}));
}

TEST_F(CarveOut, ARelativePointerIsTakenFromTheWorktree) {
  Write(wt_ + "/.git", "gitdir: ../outside/./sep.git\r\n");
  EXPECT_EQ(Resolve().git_dir, tree_.Path("outside/sep.git"));
}

TEST_F(CarveOut, ADotGitSymlinkIsRefused) {
  fs::create_symlink(tree_.Path("outside/sep.git"), wt_ + "/.git");
  const Error e = Refused();
  EXPECT_EQ(e.where, wt_ + "/.git");
  EXPECT_NE(e.what.find("symbolic link"), std::string::npos) << e.what;
}

TEST_F(CarveOut, APointerThroughASymlinkedDirectoryIsRefused) {
  fs::create_directory_symlink(tree_.Path("outside"), wt_ + "/planted");
  Write(wt_ + "/.git", "gitdir: " + wt_ + "/planted/sep.git\n");
  const Error e = Refused();
  EXPECT_NE(e.what.find("symbolic link"), std::string::npos) << e.what;
  // The same with the link as the last component.
  fs::remove(wt_ + "/planted");
  fs::create_directory_symlink(tree_.Path("outside/sep.git"), wt_ + "/planted");
  Write(wt_ + "/.git", "gitdir: planted\n");
  EXPECT_NE(Refused().what.find("symbolic link"), std::string::npos);
}

TEST_F(CarveOut, ACommondirFileThatIsASymlinkOrNamesOneIsRefused) {
  const std::string git_dir = tree_.Path("outside/sep.git/worktrees/wt");
  Write(wt_ + "/.git", "gitdir: " + git_dir + "\n");
  Write(tree_.Path("outside/commondir-elsewhere"), "../..\n");
  fs::create_symlink(tree_.Path("outside/commondir-elsewhere"), git_dir + "/commondir");
  EXPECT_NE(Refused().what.find("symbolic link"), std::string::npos);
  fs::remove(git_dir + "/commondir");
  fs::create_directory_symlink(tree_.Path("outside/sep.git"), tree_.Path("outside/link"));
  Write(git_dir + "/commondir", tree_.Path("outside/link") + "\n");
  const Error e = Refused();
  EXPECT_EQ(e.where, git_dir + "/commondir");
  EXPECT_NE(e.what.find("symbolic link"), std::string::npos) << e.what;
}

TEST_F(CarveOut, APointerThatSaysSomethingElseIsRefused) {
  for (const std::string text : {"", "gitdir:", "gitdir: ", "git: /x\n", "gitdir: a\nb\n"}) {
    Write(wt_ + "/.git", text);
    const Error e = Refused();
    EXPECT_EQ(e.where, wt_ + "/.git") << text;
  }
  Write(wt_ + "/.git", "gitdir: " + tree_.Path("outside/secret") + "\n");  // a file, not a directory
  EXPECT_NE(Refused().what.find("not a directory"), std::string::npos);
  Write(wt_ + "/.git", "gitdir: " + std::string(kGitPointerMaxBytes, 'a'));
  EXPECT_NE(Refused().what.find("larger than"), std::string::npos);
}

TEST_F(CarveOut, ADotGitThatIsNeitherFileNorDirectoryIsRefused) {
  ASSERT_EQ(mkfifo((wt_ + "/.git").c_str(), 0600), 0);
  EXPECT_NE(Refused().what.find("neither"), std::string::npos);
}

TEST(CarveOutAncestors, StrictlyBetweenTheGrantAndThePath) {
  EXPECT_EQ(AncestorsWithin("/g", "/g/a/b/c"), (std::vector<std::string>{"/g/a", "/g/a/b"}));
  EXPECT_EQ(AncestorsWithin("/g", "/g/.git"), std::vector<std::string>{});
  EXPECT_EQ(AncestorsWithin("/g", "/gx/a"), std::vector<std::string>{});
  EXPECT_EQ(AncestorsWithin("/", "/a/b"), std::vector<std::string>{"/a"});
}

// ---- The Spec as a policy ----

class SpecPolicy : public CarveOut {
 protected:
  cage::Spec WritableSpec() {
    cage::Spec spec;
    spec.argv = {"/bin/true"};
    spec.worktree = wt_;
    spec.worktree_writable = true;
    spec.scratch = tree_.Path("data");
    return spec;
  }
  static std::vector<std::string> ReadOnly(const Policy& p) {
    std::vector<std::string> out;
    for (const auto& g : p.read_only()) out.push_back(g.path);
    return out;
  }
};

TEST_F(SpecPolicy, AWritableWorktreeKeepsItsGitDirectoryReadOnlyAndMayExecute) {
  fs::create_directory(wt_ + "/.git");
  auto p = cage::PolicyForSpec(WritableSpec());
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(ReadOnly(p.value()), std::vector<std::string>{wt_ + "/.git"});
  EXPECT_TRUE(p.value().exec_writable());
  EXPECT_EQ(p.value().net().mode, NetMode::kNone);
}

TEST_F(SpecPolicy, APointerIsCarvedOutAndTheHistoryOutsideIsGrantedReadOnly) {
  const std::string git_dir = tree_.Path("outside/sep.git/worktrees/wt");
  Write(wt_ + "/.git", "gitdir: " + git_dir + "\n");
  Write(git_dir + "/commondir", "../..\n");
  auto p = cage::PolicyForSpec(WritableSpec());
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(ReadOnly(p.value()), std::vector<std::string>{wt_ + "/.git"});
  const auto& tools = p.value().tools();
  auto git = std::find_if(tools.begin(), tools.end(), [](const Tool& t) { return t.id == "git"; });
  ASSERT_NE(git, tools.end());
  EXPECT_EQ(git->paths, (std::vector<std::string>{git_dir, tree_.Path("outside/sep.git")}));
}

TEST_F(SpecPolicy, AGitDirectoryInsideAStateDirectoryIsCarvedOutThere) {
  const std::string state = tree_.Path("runtime");
  fs::create_directories(state + "/repo.git");
  Write(wt_ + "/.git", "gitdir: " + state + "/repo.git\n");
  cage::Spec spec = WritableSpec();
  spec.state_dirs = {state};
  auto p = cage::PolicyForSpec(spec);
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(ReadOnly(p.value()), (std::vector<std::string>{wt_ + "/.git", state + "/repo.git"}));
  EXPECT_EQ(p.value().state(), std::vector<std::string>{state});
}

TEST_F(SpecPolicy, ExecWritableFollowsTheWorktreeUnlessSet) {
  cage::Spec spec = WritableSpec();
  spec.exec_writable = false;
  EXPECT_FALSE(cage::PolicyForSpec(spec).value().exec_writable());
  spec.worktree_writable = false;
  spec.exec_writable.reset();
  EXPECT_FALSE(cage::PolicyForSpec(spec).value().exec_writable());
  spec.exec_writable = true;
  EXPECT_TRUE(cage::PolicyForSpec(spec).value().exec_writable());
}

TEST_F(SpecPolicy, AllowIsAnEgressAllowlist) {
  cage::Spec spec = WritableSpec();
  spec.allow = {"api.example.org", "*.files.example.org:8443"};
  auto p = cage::PolicyForSpec(spec);
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(p.value().net().mode, NetMode::kEgressAllowlist);
  EXPECT_EQ(p.value().net().allow, spec.allow);
  EXPECT_EQ(p.value().net().proxy_port, cage::kCageProxyPort);
  spec.allow = {"127.0.0.1"};
  auto bad = cage::PolicyForSpec(spec);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "allow[0]");
}

TEST_F(SpecPolicy, ErrorsNameTheSpecField) {
  cage::Spec spec = WritableSpec();
  spec.read_only = {tree_.Path("outside")};
  auto p = cage::PolicyForSpec(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, "read_only[0]");
  spec.read_only.clear();
  spec.state_dirs = {tree_.Path("missing")};
  p = cage::PolicyForSpec(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, "state_dirs[0]");
  spec.state_dirs.clear();
  fs::create_symlink(tree_.Path("outside"), wt_ + "/.git");
  p = cage::PolicyForSpec(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, cage::kGitCarveOutField);
}

}  // namespace
}  // namespace oarbank
