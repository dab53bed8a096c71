// Shared by the confinement tests (launch/confine_test.cc,
// launch/egress_confine_test.cc): a fixture, parameterised by the confined
// uid, that confines a forked child with a policy's plan and runs one call
// there.
#pragma once

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "sandbox/host/host_facts.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"
#include "sandbox/testing/child.h"
#include "sandbox/testing/test_util.h"

namespace oarbank::testing {

// What the confined call gave: its return value (an errno, 0 for success,
// in the tests), or the signal that killed the child, or a setup failure.
struct ConfinedCall {
  int value = -1;
  int signal = 0;
  std::string setup_error;
};

class ConfinedTest : public ::testing::TestWithParam<uid_t> {
 protected:
  void SetUp() override {
    if (GetParam() != getuid() && getuid() != 0) GTEST_SKIP() << "switching to uid " << GetParam() << " needs root";
    host_ = ProbeHost();
    ProbeRootEtc(host_);
    if (host_.landlock_abi < 6)
      GTEST_SKIP() << "this kernel has Landlock ABI " << host_.landlock_abi << " (< 6): every policy is refused";
  }

  // Confines a forked child with `policy` as the test's uid, runs `call`
  // there, and returns what it gave.
  ConfinedCall Confined(const Policy& policy, const std::function<int()>& call, LaunchOptions options = {}) {
    const Plan plan = PlanConfinement(policy, host_);
    if (options.root_etc_idmap_fd < 0 && host_.etc_view.idmap) options.root_etc_idmap_fd = host_.etc_view.idmap->get();
    if (plan.placement.verdict != Verdict::kOk) return {-1, 0, PlacementLine(plan.placement)};
    const auto child = RunInChild([&] {
      if (!BecomeUser(GetParam())) return std::string("E setuid: ") + strerror(errno);
      if (prctl(PR_SET_DUMPABLE, 1) != 0)  // as an exec would (setresuid cleared it)
        return std::string("E dumpable: ") + strerror(errno);
      if (auto failure = ConfineSelf(plan, options)) return "E " + StepFailureLine(*failure);
      return "R " + std::to_string(call());
    });
    ConfinedCall out;
    if (WIFSIGNALED(child.status))
      out.signal = WTERMSIG(child.status);
    else if (child.text.rfind("R ", 0) == 0)
      out.value = atoi(child.text.c_str() + 2);
    else
      out.setup_error = child.text.rfind("E ", 0) == 0 ? child.text.substr(2) : "child wrote nothing";
    return out;
  }

  TempTree tree_;
  HostFacts host_;
};

}  // namespace oarbank::testing
