#include "sandbox/common/path_within.h"

#include <gtest/gtest.h>

namespace oarbank {
namespace {

TEST(PathWithinTest, APathIsAtOrBelowItselfButNotStrictlyBelow) {
  EXPECT_TRUE(IsAtOrBelow("/a/b", "/a/b"));
  EXPECT_FALSE(IsStrictlyBelow("/a/b", "/a/b"));
  EXPECT_TRUE(IsAtOrBelow("/", "/"));
  EXPECT_FALSE(IsStrictlyBelow("/", "/"));
}

TEST(PathWithinTest, RootHoldsEveryOtherAbsolutePath) {
  for (const char* path : {"/a", "/a/b", "/usr/lib/x86_64-linux-gnu"}) {
    EXPECT_TRUE(IsAtOrBelow(path, "/")) << path;
    EXPECT_TRUE(IsStrictlyBelow(path, "/")) << path;
  }
}

TEST(PathWithinTest, ASiblingThatSharesThePrefixIsNotBelow) {
  EXPECT_FALSE(IsAtOrBelow("/a/bc", "/a/b"));
  EXPECT_FALSE(IsStrictlyBelow("/a/bc", "/a/b"));
  EXPECT_FALSE(IsAtOrBelow("/a/bc/d", "/a/b"));
  EXPECT_FALSE(IsStrictlyBelow("/a/b.git", "/a/b"));
  EXPECT_FALSE(IsAtOrBelow("/a/b", "/a/bc"));
}

TEST(PathWithinTest, DeeperPathsAreBelowEveryAncestor) {
  for (const char* dir : {"/a", "/a/b", "/a/b/c"}) {
    EXPECT_TRUE(IsAtOrBelow("/a/b/c/d", dir)) << dir;
    EXPECT_TRUE(IsStrictlyBelow("/a/b/c/d", dir)) << dir;
  }
}

TEST(PathWithinTest, AnAncestorOrAnUnrelatedPathIsNotBelow) {
  EXPECT_FALSE(IsAtOrBelow("/a", "/a/b"));
  EXPECT_FALSE(IsStrictlyBelow("/a", "/a/b"));
  EXPECT_FALSE(IsAtOrBelow("/", "/a"));
  EXPECT_FALSE(IsAtOrBelow("/x/b", "/a/b"));
  EXPECT_FALSE(IsStrictlyBelow("/x/a/b", "/a"));
}

}  // namespace
}  // namespace oarbank
