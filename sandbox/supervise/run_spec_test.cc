// cage::Run(Spec): the coding-agent cage's API under the supervisor, as root
// and as uid 65534, run twice where the first run may plant what the second
// must refuse (supervisor_test.h).
#include "sandbox/supervise/supervisor_test.h"

namespace oarbank {
namespace {

TEST_P(SupervisorTest, RunSpecWorktreeReadOnlyScratchWritable) {
  // The basic Spec: a read-only worktree, a writable scratch (HOME).
  tree_.Write("bundle/src.txt", "source\n", 0644);
  cage::Spec spec;
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  spec.argv = {"/bin/sh", "-c", "cat src.txt; echo x > src2.txt; echo built > $HOME/out.txt && pwd"};
  const auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  ASSERT_EQ(r.fault, cage::Fault::kNone) << r.reason;
  EXPECT_EQ(r.stdout_text, "source\n" + tree_.Path("bundle") + "\n");
  EXPECT_NE(r.stderr_text.find(std::string("src2.txt: ") + strerror(EROFS)), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(tree_.Path("bundle/src2.txt")));
  EXPECT_TRUE(std::filesystem::exists(tree_.Path("work/out.txt")));
  // worktree_writable: the same write now lands.
  spec.worktree = tree_.Path("data");
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c", "echo x > src2.txt"};
  EXPECT_EQ(RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); }).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(tree_.Path("data/src2.txt")));
}

TEST_P(SupervisorTest, RunSpecRefusesBelowTheAbiFloorAndBadPaths) {
  cage::Spec spec;
  spec.worktree = tree_.Path("bundle");
  spec.scratch = tree_.Path("work");
  spec.argv = {"/bin/true"};
  spec.abi_floor = 99;
  auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(r.reason.rfind("abi_floor: ", 0), 0u) << r.reason;
  spec.abi_floor = 1;
  spec.read_dirs = {"relative/dir"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(r.reason, "policy: read_dirs[0]: expected an absolute path, got \"relative/dir\"");
}

// What one job leaves for the next: run 1 replaces a nested grant (a
// worktree inside the agent's state) with a link to the caller's home and
// plants a .git pointer to it; run 2, the same Spec, is refused naming the
// link, and never reads the secret or writes the home.
TEST_P(SupervisorTest, RunSpecTwiceTheSecondRefusesWhatTheFirstPlanted) {
  const std::string state = tree_.Path("data/state");
  const std::string wt = state + "/worktrees/t42";
  std::filesystem::create_directories(wt);
  std::filesystem::create_directories(tree_.Path("data/plain"));
  chown(state.c_str(), GetParam(), GetParam());
  chown((state + "/worktrees").c_str(), GetParam(), GetParam());
  chown(wt.c_str(), GetParam(), GetParam());
  chown(tree_.Path("data/plain").c_str(), GetParam(), GetParam());
  const std::string home = tree_.Path("outside");
  cage::Spec spec;
  spec.state_dirs = {state};
  spec.worktree = wt;
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c",
               "cd / && mv " + state + "/worktrees " + state + "/wt-old && mkdir " + state + "/worktrees && ln -s " +
                   home + " " + wt};
  auto r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  ASSERT_EQ(r.exit_code, 0) << r.reason << r.stderr_text;
  ASSERT_TRUE(std::filesystem::is_symlink(wt));  // run 1 could plant it: the attack is real
  spec.argv = {"/bin/sh", "-c", "cat secret; echo planted >> secret"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused());
  EXPECT_EQ(r.reason.rfind("policy: worktree: " + wt + " is a symbolic link (to " + home + "), refused: ", 0), 0u)
      << r.reason;
  EXPECT_EQ(ReadFileUpTo(home + "/secret", 1 << 10).value_or(""), "ssh private key\n");
  // A .git pointer planted in a plain worktree names the secret's directory.
  spec = {};
  spec.worktree = tree_.Path("data/plain");
  spec.worktree_writable = true;
  spec.argv = {"/bin/sh", "-c", "printf 'gitdir: " + home + "\\n' > .git"};
  ASSERT_EQ(RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); }).exit_code, 0);
  spec.argv = {"/bin/cat", home + "/secret"};
  r = RunAs(GetParam(), [&] { return cage::Run(spec, UnprovenOptions()); });
  EXPECT_TRUE(r.refused());
  EXPECT_NE(r.reason.find("which is not a git directory that lists this worktree"), std::string::npos) << r.reason;
  EXPECT_EQ(r.stdout_text, "");
}

INSTANTIATE_TEST_SUITE_P(AsRootAndNobody, SupervisorTest, ::testing::Values(uid_t{0}, kNobody), [](const auto& info) {
  return info.param == 0 ? std::string("root") : std::string("nobody");
});

}  // namespace
}  // namespace oarbank
