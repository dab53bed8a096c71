// The stub build fails closed: nothing is available, every Run is refused
// with its reason, and the job's argv never runs.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "oarbank/cage.h"

namespace {

namespace cage = oarbank::cage;

TEST(Stub, NothingIsAvailableAndItSaysWhy) {
  EXPECT_FALSE(cage::Available());
  const cage::Availability a = cage::CheckAvailability();
  EXPECT_FALSE(a.available);
  EXPECT_FALSE(a.attested);
  EXPECT_TRUE(a.proven_classes.empty());
  EXPECT_NE(a.reason.find("stub build"), std::string::npos) << a.reason;
}

TEST(Stub, EveryRunIsRefusedAndNothingRuns) {
  char dir[] = "/tmp/oarbank-stub-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string marker = std::string(dir) + "/ran";
  cage::Spec spec;
  spec.argv = {"/bin/sh", "-c", "touch " + marker};
  spec.worktree = dir;
  spec.worktree_writable = true;
  for (const cage::Result& r : {cage::Run(spec), cage::Run(spec, cage::RunOptions{})}) {
    EXPECT_TRUE(r.refused());
    EXPECT_EQ(r.fault, cage::Fault::kRefused);
    EXPECT_STREQ(cage::FaultName(r.fault), "refused");
    EXPECT_NE(r.reason.find("stub build"), std::string::npos) << r.reason;
    EXPECT_EQ(r.exit_code, -1);
  }
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the stub ran the job's argv";
  rmdir(dir);
}

}  // namespace
