// Tests for the read-only carve-outs' placement (carve_out.h). Where a
// worktree's history is found is git_history_test.cc; the binds themselves
// are tested end to end, with a real git, in harness/test_cage.py.
#include "sandbox/launch/carve_out.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace oarbank {
namespace {

TEST(CarveOutAncestors, StrictlyBetweenTheGrantAndThePath) {
  EXPECT_EQ(AncestorsWithin("/g", "/g/a/b/c"), (std::vector<std::string>{"/g/a", "/g/a/b"}));
  EXPECT_EQ(AncestorsWithin("/g", "/g/.git"), std::vector<std::string>{});
  EXPECT_EQ(AncestorsWithin("/g", "/gx/a"), std::vector<std::string>{});
  EXPECT_EQ(AncestorsWithin("/", "/a/b"), std::vector<std::string>{"/a"});
}

}  // namespace
}  // namespace oarbank
