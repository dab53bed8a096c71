#include "sandbox/host/host_facts.h"

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
