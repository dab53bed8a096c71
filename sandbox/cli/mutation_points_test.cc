// The mutation analysis's points (mutation_points.h) cover every rule of
// every table: a row added without a point fails here, and each plan point
// removes what it names.
#include "sandbox/cli/mutation_points.h"

#include <gtest/gtest.h>

#include <set>

#include "sandbox/launch/enforce.h"
#include "sandbox/seccomp/filter.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::FakeHost;
using testing::TempTree;

// Plans of policies that together select every row of the seccomp table.
std::vector<std::pair<Plan, NetMode>> EveryKindOfPlan(TempTree& tree) {
  const std::string broker = "\"broker\": \"" + tree.MakeSocket("broker.sock") + "\"";
  std::vector<std::pair<Plan, NetMode>> plans;
  for (const char* net : {R"("net": {"mode": "none"})",
                          R"("net": {"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 3128})",
                          R"("net": {"mode": "egress-any"})"})
    for (const char* exec_writable : {"true", "false"})
      for (bool with_broker : {false, true}) {
        std::string extra = std::string(net) + ", \"exec_writable\": " + exec_writable;
        if (with_broker) extra += ", " + broker;
        const Policy policy = tree.Runner(extra);
        plans.emplace_back(PlanConfinement(policy, FakeHost(kNewestKnownAbiNumber)), policy.net().mode);
      }
  return plans;
}

TEST(MutationPoints, EveryRowOfEveryTableIsAPoint) {
  TempTree tree;
  std::set<std::string> ids;
  for (const auto& [plan, net] : EveryKindOfPlan(tree))
    for (const auto& p : MutationPoints(plan, net)) ids.insert(p.id);
  const auto& table = SeccompRuleTable();
  for (size_t i = 0; i < table.size(); ++i)
    EXPECT_TRUE(ids.count("seccomp." + std::to_string(i) + "." + table[i].syscall))
        << "row " << i << " " << table[i].syscall;
  for (const char* id : {"landlock.fs.execute",
                         "landlock.fs.write_file",
                         "landlock.fs.read_file",
                         "landlock.fs.refer",
                         "landlock.fs.truncate",
                         "landlock.fs.ioctl_dev",
                         "landlock.fs.resolve_unix",
                         "landlock.net.bind_tcp",
                         "landlock.net.connect_tcp",
                         "landlock.scope.abstract_unix_socket",
                         "landlock.scope.signal",
                         "landlock.widen.bundle",
                         "landlock.widen.work",
                         "landlock.widen.base-system",
                         "mount.read-only",
                         "mount.noexec",
                         "seccomp.seccomp-above-table",
                         "environment.environment-filter",
                         "job.namespace-pid",
                         "job.namespace-net",
                         "job.job-proc",
                         "gate.gate-inodes",
                         "egress.job-ruleset-classes",
                         "egress.job-ruleset-host-addresses",
                         "egress.proxy-host-names",
                         "egress.proxy-allowlist",
                         "egress.proxy-public-only",
                         "egress.proxy-own-host",
                         "egress.proxy-wildcard-rate",
                         "egress.proxy-head-limit",
                         "egress.proxy-connection-caps"})
    EXPECT_TRUE(ids.count(id)) << id;
  for (LaunchStep step :
       {LaunchStep::kPlacement, LaunchStep::kCloseFds, LaunchStep::kNoNewPrivs, LaunchStep::kCoreDumps,
        LaunchStep::kMountNamespace, LaunchStep::kTerminal, LaunchStep::kDropCapabilities, LaunchStep::kLandlock,
        LaunchStep::kSeccomp, LaunchStep::kGate})
    EXPECT_TRUE(ids.count(std::string("launch.") + StepName(step))) << StepName(step);
}

TEST(MutationPoints, EachPlanPointRemovesWhatItNames) {
  TempTree tree;
  for (const auto& [plan, net] : EveryKindOfPlan(tree))
    for (const auto& p : MutationPoints(plan, net)) {
      if (p.var != "OARBANK_FAULT_MUTANT") continue;
      Plan mutant = plan;
      ASSERT_TRUE(RemovePlanPoint(p.value, mutant)) << p.id;
      const bool changed =
          mutant.seccomp.size() != plan.seccomp.size() || mutant.landlock.handled_fs != plan.landlock.handled_fs ||
          mutant.landlock.handled_net != plan.landlock.handled_net || mutant.landlock.scoped != plan.landlock.scoped ||
          mutant.read_only_mounts != plan.read_only_mounts || mutant.writable_noexec != plan.writable_noexec || [&] {
            for (size_t i = 0; i < plan.landlock.paths.size(); ++i)
              if (mutant.landlock.paths[i].access != plan.landlock.paths[i].access) return true;
            return false;
          }();
      EXPECT_TRUE(changed) << p.id << " left the plan as it was";
    }
  Plan plan = EveryKindOfPlan(tree).front().first;
  EXPECT_FALSE(RemovePlanPoint("no.such.point", plan));
  EXPECT_FALSE(RemovePlanPoint("seccomp.99999.x", plan));
}

}  // namespace
}  // namespace oarbank
