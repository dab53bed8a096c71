// The supervised job's planner: pure, from a policy, host facts and the
// caller's options; every decision the supervisor and the report use.
#include "sandbox/supervise/job_plan.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "sandbox/plan/report.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::FakeHost;
using testing::TempTree;

// A host whose cgroup is delegated with `controllers`.
HostFacts DelegatedHost(std::vector<std::string> controllers) {
  HostFacts host = FakeHost(7);
  host.cgroup.probed = true;
  host.cgroup.v2_mounted = true;
  host.cgroup.mount_point = "/sys/fs/cgroup";
  host.cgroup.own_path = "/sys/fs/cgroup/agent";
  host.cgroup.writable = true;
  host.cgroup.controllers = std::move(controllers);
  return host;
}

TEST(JobPlanTest, ARunnableJobGetsItsNamespacesDevicesMapsAndGate) {
  TempTree tree;
  const JobPlan plan = PlanSupervisedJob(tree.Runner(), FakeHost(7), cage::RunOptions{});
  EXPECT_EQ(plan.refusal, "");
  EXPECT_EQ(plan.namespaces.Names(), "user,pid,ipc,uts,mnt,net");
  EXPECT_EQ(plan.id_maps.uid_map, "1000 1000 1\n");
  EXPECT_TRUE(plan.confinement.job_devices.enabled);
  EXPECT_EQ(plan.confinement.job_devices.shm_bytes, kDefaultShmBytes);
  EXPECT_EQ(plan.gate.fresh, (std::vector<std::string>{"user", "pid", "ipc", "uts", "mnt", "net"}));
  // Not exec_writable: every writable grant must be mounted noexec, and each
  // is read back by inode.
  EXPECT_EQ(plan.gate.noexec, plan.confinement.writable_binds);
  EXPECT_FALSE(plan.gate.noexec.empty());
  EXPECT_EQ(plan.gate.inodes.size(), plan.confinement.writable_binds.size());
  EXPECT_TRUE(plan.gate.job_devices);
  EXPECT_FALSE(plan.gate.root_etc_idmapped);
  EXPECT_EQ(plan.gate.cgroup_line, "");  // the supervisor names the leaf
  // exec_writable: nothing need be noexec.
  EXPECT_TRUE(PlanSupervisedJob(tree.Runner(R"("exec_writable": true)"), FakeHost(7), {}).gate.noexec.empty());
}

TEST(JobPlanTest, RootsEtcViewIsExpectedAtTheGateUnlessTheJobRunsAsAnotherUser) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  host.runs_as_root = true;
  host.uid = host.gid = 0;
  host.etc_view.idmap = std::make_shared<const UniqueFd>(dup(0));
  EXPECT_TRUE(PlanSupervisedJob(tree.Runner(), host, {}).gate.root_etc_idmapped);
  cage::RunOptions as_nobody;
  as_nobody.run_as_uid = 65534;
  as_nobody.run_as_gid = 65534;
  const JobPlan nobody = PlanSupervisedJob(tree.Runner(), host, as_nobody);
  EXPECT_EQ(nobody.refusal, "");
  EXPECT_FALSE(nobody.gate.root_etc_idmapped);
  EXPECT_EQ(nobody.id_maps.uid_map, "0 0 1\n65534 65534 1\n");
}

TEST(JobPlanTest, EachRefusalIsOneLineInItsOrder) {
  TempTree tree;
  cage::RunOptions options;
  options.abi_floor = 8;
  EXPECT_EQ(PlanSupervisedJob(tree.Runner(), FakeHost(7), options).refusal,
            "abi_floor: this host's Landlock ABI is 7, below the floor 8");
  EXPECT_EQ(PlanSupervisedJob(tree.Runner(), FakeHost(0), {}).refusal,
            "abi_floor: this host's Landlock ABI is 0, below the floor 1");
  HostFacts no_userns = FakeHost(7);
  no_userns.user_namespaces = false;
  no_userns.user_namespaces_detail = "user.max_user_namespaces is 0";
  EXPECT_EQ(PlanSupervisedJob(tree.Runner(), no_userns, {}).refusal,
            "namespaces: user namespaces are refused here: user.max_user_namespaces is 0");
  cage::RunOptions run_as;
  run_as.run_as_uid = 65534;
  EXPECT_EQ(PlanSupervisedJob(tree.Runner(), FakeHost(7), run_as).refusal, "run_as: needs a root supervisor");
  const JobPlan placed = PlanSupervisedJob(tree.Runner(R"("net": {"mode": "egress-any"})"), FakeHost(7), {});
  EXPECT_EQ(placed.refusal.rfind("sandbox: CAPABILITY_NOT_ENFORCED", 0), 0u) << placed.refusal;
  EXPECT_FALSE(placed.confinement.job_devices.enabled);
  cage::RunOptions tiny_shm;
  tiny_shm.shm_max = 4095;
  EXPECT_EQ(PlanSupervisedJob(tree.Runner(), FakeHost(7), tiny_shm).refusal,
            "shm_max: /dev/shm needs at least 4096 bytes");
}

TEST(JobPlanTest, HardLimitsNeedTheirControllersAndAreNeverAQuietUnavailable) {
  TempTree tree;
  cage::RunOptions hard;
  hard.hard_limits = true;
  const Policy pids = tree.Runner(R"("limits": {"pids": 64})");
  // Reservations (no hard limits): nothing refused, pids.max where delegated.
  EXPECT_EQ(PlanSupervisedJob(pids, FakeHost(7), {}).refusal, "");
  EXPECT_EQ(DescribeLeafLimits(PlanSupervisedJob(pids, FakeHost(7), {}).limits), "pids.max unavailable");
  const JobPlan delegated = PlanSupervisedJob(pids, DelegatedHost({"pids"}), hard);
  EXPECT_EQ(delegated.refusal, "");
  EXPECT_TRUE(delegated.cgroup.usable);
  EXPECT_EQ(DescribeLeafLimits(delegated.limits), "pids.max=64");
  const std::string none = PlanSupervisedJob(pids, DelegatedHost({}), hard).refusal;
  EXPECT_EQ(none,
            "sandbox: CAPABILITY_NOT_ENFORCED: limits.pids (pids.max needs the pids controller; "
            "/sys/fs/cgroup/agent offers none)");
  const std::string memory =
      PlanSupervisedJob(tree.Runner(R"("limits": {"mem_gb": 1})"), DelegatedHost({"pids"}), hard).refusal;
  EXPECT_EQ(memory.rfind("sandbox: CAPABILITY_NOT_ENFORCED: limits.memory (", 0), 0u) << memory;
  const std::string cpu = PlanSupervisedJob(tree.Runner(R"("limits": {"cpus": 1})"), FakeHost(7), hard).refusal;
  EXPECT_EQ(cpu.rfind("sandbox: CAPABILITY_NOT_ENFORCED: limits.cpu (", 0), 0u) << cpu;
}

TEST(JobPlanTest, TheReportPrintsThePlanItself) {
  TempTree tree;
  const JobPlan plan = PlanSupervisedJob(tree.Runner(R"("limits": {"pids": 64})"), DelegatedHost({"pids"}), {});
  const nlohmann::ordered_json report = JobPlanReport(plan);
  EXPECT_TRUE(report["runnable"].get<bool>());
  EXPECT_EQ(report["namespaces"], plan.namespaces.Names());
  EXPECT_EQ(report["net"], plan.namespaces.net_detail);
  EXPECT_EQ(report["limits"], "pids.max=64");
  EXPECT_EQ(report["devices"]["shm_bytes"], kDefaultShmBytes);
  EXPECT_EQ(report["gate"]["noexec"].size(), plan.gate.noexec.size());
  HostFacts old = FakeHost(7);
  old.landlock_abi = 0;
  const nlohmann::ordered_json refused = JobPlanReport(PlanSupervisedJob(tree.Runner(), old, {}));
  EXPECT_FALSE(refused["runnable"].get<bool>());
  EXPECT_EQ(refused["refusal"], "abi_floor: this host's Landlock ABI is 0, below the floor 1");
}

// What the supervisor does not probe (SupervisedProbeScope: GPU nodes
// unless devices.gpu = "compute") cannot change a job's plan: the same with
// GPU nodes present as with them left unread, whatever the ABI and policy.
RC_GTEST_PROP(JobPlanProperty, TheSupervisorsProbeScopeLeavesOutNothingThePlanReads, ()) {
  static TempTree tree;
  const int abi = *rc::gen::inRange(0, kNewestKnownAbiNumber + 2);
  const bool gpu = *rc::gen::arbitrary<bool>();
  std::string extra = *rc::gen::arbitrary<bool>() ? R"("exec_writable": true)" : R"("exec_writable": false)";
  if (gpu) extra += R"(, "devices": {"gpu": "compute"})";
  const Policy policy = tree.Runner(extra);
  HostFacts full = DelegatedHost({"cpu", "memory", "pids"});
  full.landlock_abi = abi;
  full.gpu_nodes = {"/dev/dri", "/dev/kfd"};
  const ProbeScope scope = SupervisedProbeScope(policy);
  RC_ASSERT(scope.gpu_nodes == gpu);
  RC_ASSERT(scope.cgroup);
  HostFacts scoped = full;
  if (!scope.gpu_nodes) scoped.gpu_nodes.clear();
  const JobPlan a = PlanSupervisedJob(policy, full, {});
  const JobPlan b = PlanSupervisedJob(policy, scoped, {});
  RC_ASSERT(JobPlanReport(a).dump() == JobPlanReport(b).dump());
  RC_ASSERT(PlanReport(a.confinement).dump() == PlanReport(b.confinement).dump());
}

// On this host: a job without devices.gpu leaves /dev unlisted, and still
// reads what its plan needs (the cgroup facts).
TEST(JobPlanTest, TheSupervisedProbeListsGpuNodesOnlyForAGpuJob) {
  TempTree tree;
  const HostFacts plain = ProbeSupervisedHost(-1, JobNetworkProbeDepth::kNone, SupervisedProbeScope(tree.Runner()));
  EXPECT_TRUE(plain.gpu_nodes.empty());
  EXPECT_TRUE(plain.cgroup.probed);
  const HostFacts gpu = ProbeSupervisedHost(-1, JobNetworkProbeDepth::kNone,
                                            SupervisedProbeScope(tree.Runner(R"("devices": {"gpu": "compute"})")));
  EXPECT_EQ(gpu.gpu_nodes, ProbeHost().gpu_nodes);
}

}  // namespace
}  // namespace oarbank
