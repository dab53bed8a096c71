// Whether the cage is available here and what a job's namespaces are:
// pure, from host facts.
#include "sandbox/supervise/supervisor_test.h"

namespace oarbank {
namespace {

TEST(AvailabilityTest, RefusedUserNamespacesAreSaidAndNeverFallenBackFrom) {
  HostFacts host = testing::FakeHost(7);
  EXPECT_TRUE(cage::AssessAvailability(host, true, "available").available);
  host.user_namespaces = false;
  host.user_namespaces_detail = "kernel.unprivileged_userns_clone is 0";
  const auto a = cage::AssessAvailability(host, true, "available");
  EXPECT_FALSE(a.available);
  // The launcher's own table also loses exec_writable.deny without them.
  EXPECT_NE(a.reason.find("user namespaces: kernel.unprivileged_userns_clone is 0"), std::string::npos) << a.reason;
  host.user_namespaces = true;
  const auto b = cage::AssessAvailability(host, false, "clone(...): Operation not permitted");
  EXPECT_FALSE(b.available);
  EXPECT_EQ(b.reason, "namespaces: clone(...): Operation not permitted");
  EXPECT_FALSE(cage::AssessAvailability(testing::FakeHost(0), true, "available").available);
}

TEST(AvailabilityTest, ThisHostSaysWhatItCanDo) {
  const auto a = cage::CheckAvailability();
  const HostFacts host = ProbeHost();
  // The gate and the report agree, and a negative answer always says why.
  EXPECT_EQ(a.available, cage::SupervisorReport(host, nullptr)["available"].get<bool>());
  if (!a.available) {
    EXPECT_FALSE(a.reason.empty());
    EXPECT_FALSE(cage::Available());
  }
}

// Available() is Run(Spec)'s answer: the cage, and the Spec's class proven.
TEST(AvailabilityTest, AvailableNeedsTheSpecClassProven) {
  if (!cage::CheckAvailability().available) GTEST_SKIP() << "the cage is not available here";
  TempTree tree;
  const std::string path = tree.Path("attestation.json");
  setenv("OARBANK_BATTERY_ATTESTATION", path.c_str(), 1);
  auto a = cage::CheckAvailability();
  EXPECT_FALSE(a.attested);
  EXPECT_NE(a.proof_detail.find("no battery attestation"), std::string::npos) << a.proof_detail;
  EXPECT_FALSE(cage::Available());
  Attestation att;
  att.binding = BindingForThisProcess(ProbeHost());
  att.proven_classes = {PolicyClass(cage::PolicyForSpec(cage::Spec{}).value())};
  ASSERT_EQ(WriteAttestation(path, att), "");
  a = cage::CheckAvailability();
  EXPECT_TRUE(a.attested) << a.proof_detail;
  EXPECT_EQ(a.proven_classes, att.proven_classes);
  EXPECT_TRUE(cage::Available());
  unsetenv("OARBANK_BATTERY_ATTESTATION");
}

TEST(NamespacePlanTest, NetNoneGetsAnEmptyNetworkNamespace) {
  TempTree tree;
  EXPECT_EQ(PlanJobNamespaces(tree.Runner()).Names(), "user,pid,ipc,uts,mnt,net");
  const NamespacePlan egress = PlanJobNamespaces(tree.Runner(R"("net": {"mode": "egress-allowlist",
                                                            "allow": ["a.example"], "proxy_port": 3128})"));
  EXPECT_EQ(egress.Names(), "user,pid,ipc,uts,mnt,net");
  EXPECT_TRUE(egress.egress_listener);
  EXPECT_NE(egress.net_detail.find("127.0.0.1:3128"), std::string::npos) << egress.net_detail;
  EXPECT_FALSE(PlanJobNamespaces(tree.Runner()).egress_listener);
  EXPECT_EQ(PlanIdMaps(1000, 1000, std::nullopt, std::nullopt).uid_map, "1000 1000 1\n");
  EXPECT_TRUE(PlanIdMaps(1000, 1000, std::nullopt, std::nullopt).deny_setgroups);
  EXPECT_EQ(PlanIdMaps(0, 0, kNobody, kNobody).uid_map, "0 0 1\n65534 65534 1\n");
  EXPECT_EQ(PlanIdMaps(1000, 1000, kNobody, kNobody).uid_map, "1000 1000 1\n");  // unprivileged: itself only
}

}  // namespace
}  // namespace oarbank
