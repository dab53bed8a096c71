// Tests for where a worktree's history is found (git_history.h): a .git
// directory, and a .git pointer only when the git directory it names lists
// the worktree back as git writes it (a linked worktree's gitdir and
// commondir, a submodule's core.worktree), or the caller names it
// (git_dir); every planted pointer, commondir and link refused; and how the
// cage's Spec turns the history into a policy (read_only inside writable
// directories, a read-only "git" tool outside them).
#include "sandbox/launch/git_history.h"

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

class GitHistory : public ::testing::Test {
 protected:
  void SetUp() override { wt_ = tree_.Path("work"); }
  static void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  // A repository's git directory as git init makes it (HEAD, objects/, refs/).
  static void MakeGitDirectory(const std::string& dir) {
    fs::create_directories(dir + "/objects");
    fs::create_directories(dir + "/refs/heads");
    Write(dir + "/HEAD", "ref: refs/heads/main\n");
  }
  // `git worktree add` of wt_ from the repository whose git directory is
  // `common`: returns the worktree's own git directory.
  std::string MakeLinkedWorktree(const std::string& common, const std::string& name = "wt") {
    MakeGitDirectory(common);
    const std::string git_dir = common + "/worktrees/" + name;
    fs::create_directories(git_dir);
    Write(git_dir + "/HEAD", "ref: refs/heads/feature\n");
    Write(git_dir + "/commondir", "../..\n");
    Write(git_dir + "/gitdir", wt_ + "/.git\n");
    Write(wt_ + "/.git", "gitdir: " + git_dir + "\n");
    return git_dir;
  }
  GitCarveOuts Resolve(const std::string& git_dir = "") {
    auto r = ResolveGitCarveOuts(wt_, git_dir);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().where + ": " + r.error().what);
    EXPECT_TRUE(r.ok() && r.value().has_value());
    return r.ok() && r.value() ? *r.value() : GitCarveOuts{};
  }
  Error Refused(const std::string& git_dir = "") {
    auto r = ResolveGitCarveOuts(wt_, git_dir);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  }
  testing::TempTree tree_;
  std::string wt_;
};

constexpr char kNotListed[] = "which is not a git directory that lists this worktree";

TEST_F(GitHistory, NoGitIsNothing) {
  auto r = ResolveGitCarveOuts(wt_);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().has_value());
}

TEST_F(GitHistory, AGitDirectoryIsItsOwnGitAndCommonDirectory) {
  MakeGitDirectory(wt_ + "/.git");
  const GitCarveOuts g = Resolve();
  EXPECT_FALSE(g.pointer);
  EXPECT_EQ(g.dot_git, wt_ + "/.git");
  EXPECT_EQ(g.git_dir, wt_ + "/.git");
  EXPECT_EQ(g.common_dir, wt_ + "/.git");
  EXPECT_EQ(g.Paths(), std::vector<std::string>{wt_ + "/.git"});
}

TEST_F(GitHistory, AGitDirectoryWithAPlantedCommondirIsRefused) {
  MakeGitDirectory(wt_ + "/.git");
  Write(wt_ + "/.git/commondir", tree_.Path("outside") + "\n");
  const Error e = Refused();
  EXPECT_EQ(e.where, wt_ + "/.git/commondir");
  EXPECT_NE(e.what.find("commondir"), std::string::npos) << e.what;
}

TEST_F(GitHistory, ALinkedWorktreeProvesItselfByItsGitdirAndCommondir) {
  const std::string common = tree_.Path("outside/main.git");
  const std::string git_dir = MakeLinkedWorktree(common);
  const GitCarveOuts g = Resolve();
  EXPECT_TRUE(g.pointer);
  EXPECT_EQ(g.git_dir, git_dir);
  EXPECT_EQ(g.common_dir, common);
  EXPECT_EQ(g.Paths(), (std::vector<std::string>{wt_ + "/.git", git_dir, common}));
  // git 2.48's worktree.useRelativePaths writes both pointers relative.
  Write(wt_ + "/.git", "gitdir: ../outside/./main.git/worktrees/wt\r\n");
  Write(git_dir + "/gitdir", "../../../../work/.git\n");
  EXPECT_EQ(Resolve().git_dir, git_dir);
}

TEST_F(GitHistory, ALinkedWorktreeWhoseGitdirNamesAnotherWorktreeIsRefused) {
  const std::string git_dir = MakeLinkedWorktree(tree_.Path("outside/main.git"));
  Write(git_dir + "/gitdir", tree_.Path("data") + "/.git\n");
  EXPECT_NE(Refused().what.find(kNotListed), std::string::npos);
  fs::remove(git_dir + "/gitdir");
  EXPECT_NE(Refused().what.find(kNotListed), std::string::npos);
}

TEST_F(GitHistory, ACommondirThatDoesNotHoldTheGitDirectoryIsRefused) {
  // A job's own git directory, whose commondir names the caller's ~/.ssh.
  const std::string git_dir = MakeLinkedWorktree(tree_.Path("data/evil.git"));
  fs::create_directories(tree_.Path("outside/ssh"));
  Write(git_dir + "/commondir", tree_.Path("outside/ssh") + "\n");
  const Error e = Refused();
  EXPECT_EQ(e.where, git_dir + "/commondir");
  EXPECT_NE(e.what.find("does not hold"), std::string::npos) << e.what;
  Write(git_dir + "/commondir", "/\n");
  EXPECT_NE(Refused().what.find("does not hold"), std::string::npos);
}

TEST_F(GitHistory, ASubmoduleProvesItselfByCoreWorktree) {
  // As `git submodule add` writes them: relative pointers both ways.
  const std::string git_dir = tree_.Path("outside/super/.git/modules/work");
  MakeGitDirectory(git_dir);
  Write(wt_ + "/.git", "gitdir: ../outside/super/.git/modules/work\n");
  Write(git_dir + "/config", "[core]\n\trepositoryformatversion = 0\n\tworktree = ../../../../../work\n");
  EXPECT_EQ(Resolve().git_dir, git_dir);
  Write(git_dir + "/config", "[core]\n\tworktree = ../../../../../data\n");
  EXPECT_NE(Refused().what.find(kNotListed), std::string::npos);
  Write(git_dir + "/config", "[core \"x\"]\n\tworktree = ../../../../../work\n");
  EXPECT_NE(Refused().what.find(kNotListed), std::string::npos);
}

TEST_F(GitHistory, ASeparateGitDirNeedsTheCallersWord) {
  // `git init --separate-git-dir` leaves no back-pointer: the same bytes a
  // job would plant.
  const std::string sep = tree_.Path("outside/sep.git");
  MakeGitDirectory(sep);
  Write(wt_ + "/.git", "gitdir: " + sep + "\n");
  const Error e = Refused();
  EXPECT_EQ(e.where, wt_ + "/.git");
  EXPECT_NE(e.what.find(kNotListed), std::string::npos) << e.what;
  EXPECT_NE(e.what.find("--git-dir"), std::string::npos) << e.what;
  const GitCarveOuts g = Resolve(sep);
  EXPECT_EQ(g.git_dir, sep);
  EXPECT_EQ(g.common_dir, sep);
  // The caller's word must be what the pointer names.
  fs::create_directories(tree_.Path("outside/other.git"));
  EXPECT_NE(Refused(tree_.Path("outside/other.git")).what.find("not to --git-dir"), std::string::npos);
}

TEST_F(GitHistory, APlantedPointerToASecretOrToRootIsRefused) {
  fs::create_directories(tree_.Path("outside/ssh"));
  for (const std::string& target : {tree_.Path("outside/ssh"), std::string("/"), std::string("/etc")}) {
    Write(wt_ + "/.git", "gitdir: " + target + "\n");
    const Error e = Refused();
    EXPECT_EQ(e.where, wt_ + "/.git") << target;
    EXPECT_NE(e.what.find(kNotListed), std::string::npos) << target << ": " << e.what;
  }
  // A real repository of the caller's that does not list this worktree.
  MakeGitDirectory(tree_.Path("outside/project/.git"));
  Write(wt_ + "/.git", "gitdir: " + tree_.Path("outside/project/.git") + "\n");
  EXPECT_NE(Refused().what.find(kNotListed), std::string::npos);
}

TEST_F(GitHistory, ADotGitSymlinkIsRefused) {
  fs::create_symlink(tree_.Path("outside"), wt_ + "/.git");
  const Error e = Refused();
  EXPECT_EQ(e.where, wt_ + "/.git");
  EXPECT_NE(e.what.find("symbolic link"), std::string::npos);
}

TEST_F(GitHistory, APointerThroughAPlantedLinkIsRefused) {
  MakeLinkedWorktree(tree_.Path("outside/main.git"));
  fs::create_directory_symlink(tree_.Path("outside"), wt_ + "/planted");
  Write(wt_ + "/.git", "gitdir: " + wt_ + "/planted/main.git/worktrees/wt\n");
  const Error e = Refused();
  EXPECT_NE(e.what.find("symbolic link"), std::string::npos) << e.what;
  // The same with the link as the last component, and in commondir.
  Write(wt_ + "/.git", "gitdir: planted\n");
  EXPECT_NE(Refused().what.find("symbolic link"), std::string::npos);
  Write(wt_ + "/.git", "gitdir: " + tree_.Path("outside/main.git/worktrees/wt") + "\n");
  Write(tree_.Path("outside/main.git/worktrees/wt/commondir"), wt_ + "/planted/main.git\n");
  EXPECT_NE(Refused().what.find("symbolic link"), std::string::npos);
  fs::remove(tree_.Path("outside/main.git/worktrees/wt/commondir"));
  fs::create_symlink(tree_.Path("outside/elsewhere"), tree_.Path("outside/main.git/worktrees/wt/commondir"));
  EXPECT_NE(Refused().what.find("symbolic link"), std::string::npos);
}

TEST_F(GitHistory, APointerThatSaysSomethingElseIsRefused) {
  for (const std::string text : {"", "gitdir:", "gitdir: ", "git: /x\n", "gitdir: a\nb\n"}) {
    Write(wt_ + "/.git", text);
    EXPECT_EQ(Refused().where, wt_ + "/.git") << text;
  }
  Write(wt_ + "/.git", "gitdir: " + tree_.Path("outside/secret") + "\n");  // a file, not a directory
  EXPECT_NE(Refused().what.find("not a directory"), std::string::npos);
  Write(wt_ + "/.git", "gitdir: " + std::string(kGitPointerMaxBytes, 'a'));
  EXPECT_NE(Refused().what.find("larger than"), std::string::npos);
}

TEST_F(GitHistory, ADotGitThatIsNeitherFileNorDirectoryIsRefused) {
  ASSERT_EQ(mkfifo((wt_ + "/.git").c_str(), 0600), 0);
  EXPECT_NE(Refused().what.find("neither"), std::string::npos);
}

TEST_F(GitHistory, AWorktreeWithoutItsOwnGitKnowsTheCheckoutAroundIt) {
  EXPECT_EQ(EnclosingCheckout(wt_), "");
  fs::create_directories(tree_.Path("work/sub/dir"));
  fs::create_directories(tree_.Path("work/.git"));
  EXPECT_EQ(EnclosingCheckout(tree_.Path("work/sub/dir")), wt_);
  EXPECT_EQ(EnclosingCheckout(tree_.Path("work/sub")), wt_);
}

TEST(GitConfig, TheLastCoreWorktreeAsGitReadsIt) {
  EXPECT_EQ(GitConfigValue("[core]\n\tworktree = ../a\n", "core", "worktree"), "../a");
  EXPECT_EQ(GitConfigValue("[Core]\nWorkTree=\"/a b\"  # comment\n", "core", "worktree"), "/a b");
  EXPECT_EQ(GitConfigValue("[core]\nworktree = /a\n[core]\nworktree = /b ; c\n", "core", "worktree"), "/b");
  EXPECT_EQ(GitConfigValue("[core] worktree = /a\n", "core", "worktree"), "/a");
  EXPECT_EQ(GitConfigValue("[core]\nworktree = /a\\\n/b\n", "core", "worktree"), "/a/b");
  EXPECT_EQ(GitConfigValue("[core]\nworktree = \"/a\\\"q\"\n", "core", "worktree"), "/a\"q");
  EXPECT_EQ(GitConfigValue("[core \"sub\"]\nworktree = /a\n", "core", "worktree"), std::nullopt);
  EXPECT_EQ(GitConfigValue("[remote]\nworktree = /a\n# [core]\n", "core", "worktree"), std::nullopt);
  EXPECT_EQ(GitConfigValue("[core]\nworktree = \"/a\n", "core", "worktree"), std::nullopt);
  EXPECT_EQ(GitConfigValue("[core\nworktree = /a\n", "core", "worktree"), std::nullopt);
  EXPECT_EQ(GitConfigValue("", "core", "worktree"), std::nullopt);
}

// ---- The Spec as a policy ----

class SpecPolicy : public GitHistory {
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
  const std::string git_dir = MakeLinkedWorktree(tree_.Path("outside/main.git"));
  auto p = cage::PolicyForSpec(WritableSpec());
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(ReadOnly(p.value()), std::vector<std::string>{wt_ + "/.git"});
  const auto& tools = p.value().tools();
  auto git = std::find_if(tools.begin(), tools.end(), [](const Tool& t) { return t.id == "git"; });
  ASSERT_NE(git, tools.end());
  EXPECT_EQ(git->paths, (std::vector<std::string>{git_dir, tree_.Path("outside/main.git")}));
}

TEST_F(SpecPolicy, APlantedPointerIsRefusedNamingTheHistory) {
  Write(wt_ + "/.git", "gitdir: " + tree_.Path("outside") + "\n");
  auto p = cage::PolicyForSpec(WritableSpec());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, cage::kGitCarveOutField);
  EXPECT_NE(p.error().what.find(kNotListed), std::string::npos) << p.error().what;
}

TEST_F(SpecPolicy, AGitDirectoryTheCallerNamesInsideAStateDirectoryIsCarvedOutThere) {
  const std::string state = tree_.Path("runtime");
  MakeGitDirectory(state + "/repo.git");
  Write(wt_ + "/.git", "gitdir: " + state + "/repo.git\n");
  cage::Spec spec = WritableSpec();
  spec.state_dirs = {state};
  EXPECT_EQ(cage::PolicyForSpec(spec).error().where, cage::kGitCarveOutField);
  spec.git_dir = state + "/repo.git";
  auto p = cage::PolicyForSpec(spec);
  ASSERT_TRUE(p.ok()) << p.error().what;
  EXPECT_EQ(ReadOnly(p.value()), (std::vector<std::string>{wt_ + "/.git", state + "/repo.git"}));
  EXPECT_EQ(p.value().state(), std::vector<std::string>{state});
  spec.worktree.clear();
  spec.worktree_writable = false;
  EXPECT_EQ(cage::PolicyForSpec(spec).error().where, "git_dir");
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

TEST_F(SpecPolicy, ANestedGrantThatIsNowAPlantedLinkIsRefusedNamingIt) {
  // Run 1 left state/worktrees/t42 as a link to the caller's home.
  fs::create_directories(tree_.Path("state/worktrees"));
  fs::create_directory_symlink(tree_.Path("outside"), tree_.Path("state/worktrees/t42"));
  cage::Spec spec = WritableSpec();
  spec.state_dirs = {tree_.Path("state")};
  spec.worktree = tree_.Path("state/worktrees/t42");
  auto p = cage::PolicyForSpec(spec);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().where, "worktree");
  EXPECT_NE(
      p.error().what.find(tree_.Path("state/worktrees/t42") + " is a symbolic link (to " + tree_.Path("outside") + ")"),
      std::string::npos)
      << p.error().what;
}

}  // namespace
}  // namespace oarbank
