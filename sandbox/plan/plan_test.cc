// PlanConfinement and the capability table over every Landlock ABI, with
// injected host facts: no syscall is made, so every ABI is tested here.
#include "sandbox/plan/plan.h"
#include "sandbox/plan/attestation.h"

#include <sys/socket.h>

#include <errno.h>
#include <filesystem>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "sandbox/plan/report.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::FakeHost;
using testing::TempTree;

std::set<std::string> AtFault(const Plan& plan) {
  std::set<std::string> ids;
  for (const auto& c : plan.placement.at_fault) ids.insert(CapabilityName(c.id));
  return ids;
}

const PathRule* FindRule(const Plan& plan, const std::string& path) {
  for (const auto& r : plan.landlock.paths)
    if (r.path == path) return &r;
  return nullptr;
}

bool HasSeccompRule(const Plan& plan, const std::string& syscall) {
  return std::any_of(plan.seccomp.begin(), plan.seccomp.end(),
                     [&](const SeccompRule& r) { return r.syscall == syscall; });
}

TEST(Placement, NoLandlockIsBackendMissing) {
  TempTree tree;
  const Plan plan = PlanConfinement(tree.Runner(), FakeHost(0));
  EXPECT_EQ(plan.placement.verdict, Verdict::kBackendMissing);
  EXPECT_TRUE(AtFault(plan).count("filesystem"));
  EXPECT_TRUE(plan.landlock.paths.empty());
}

TEST(Placement, NoSeccompIsBackendMissing) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  host.seccomp_filter = false;
  const Plan plan = PlanConfinement(tree.Runner(), host);
  EXPECT_EQ(plan.placement.verdict, Verdict::kBackendMissing);
  EXPECT_TRUE(AtFault(plan).count("seccomp"));
}

TEST(Placement, Abi2NamesTheFilesystem) {
  TempTree tree;
  const Plan plan = PlanConfinement(tree.Runner(), FakeHost(2));
  EXPECT_EQ(plan.placement.verdict, Verdict::kCapabilityNotEnforced);
  EXPECT_TRUE(AtFault(plan).count("filesystem"));
  EXPECT_NE(PlacementLine(plan.placement).find("CAPABILITY_NOT_ENFORCED: filesystem"), std::string::npos);
}

TEST(Placement, Abi3To5LackOnlyIpcScopingForNetNone) {
  TempTree tree;
  for (int abi : {3, 4, 5}) {
    const Plan plan = PlanConfinement(tree.Runner(), FakeHost(abi));
    EXPECT_EQ(plan.placement.verdict, Verdict::kCapabilityNotEnforced) << abi;
    EXPECT_EQ(AtFault(plan), std::set<std::string>{"ipc.scoping"}) << abi;
  }
}

TEST(Placement, Abi6AndNewerRunTheStrictRunner) {
  TempTree tree;
  for (int abi = 6; abi <= kNewestKnownAbiNumber + 2; ++abi) {
    const Plan plan = PlanConfinement(tree.Runner(), FakeHost(abi));
    EXPECT_EQ(plan.placement.verdict, Verdict::kOk) << abi;
    EXPECT_TRUE(plan.gaps.empty()) << abi;
  }
}

TEST(Placement, EgressNeedsAbi4AndAnyIsNeverEnforced) {
  TempTree tree;
  const Policy egress =
      tree.Runner(R"("net": {"mode": "egress-allowlist", "allow": ["api.example.org"], "proxy_port": 3128})");
  EXPECT_TRUE(AtFault(PlanConfinement(egress, FakeHost(3))).count("net.egress-allowlist"));
  EXPECT_EQ(PlanConfinement(egress, FakeHost(6)).placement.verdict, Verdict::kOk);
  const Policy any = tree.Runner(R"("net": {"mode": "egress-any"})");
  EXPECT_EQ(AtFault(PlanConfinement(any, FakeHost(kNewestKnownAbiNumber))), std::set<std::string>{"net.egress-any"});
}

TEST(Placement, ExecWritableDenyNeedsAMountNamespace) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  host.user_namespaces = false;
  host.user_namespaces_detail = "kernel.unprivileged_userns_clone is 0";
  const Plan strict = PlanConfinement(tree.Runner(), host);
  EXPECT_EQ(AtFault(strict), (std::set<std::string>{"exec_writable.deny", "filesystem.metadata"}));
  EXPECT_NE(PlacementLine(strict.placement).find("unprivileged_userns_clone"), std::string::npos);
  // Granting exec_writable still needs it, for the read-only mounts.
  EXPECT_EQ(AtFault(PlanConfinement(tree.Runner(R"("exec_writable": true)"), host)),
            std::set<std::string>{"filesystem.metadata"});
}

bool RefusesUnixSockets(const Plan& plan) {
  return std::any_of(plan.seccomp.begin(), plan.seccomp.end(), [](const SeccompRule& r) {
    return r.syscall == "socket" && r.when == When::kNoBroker && r.args.size() == 1 && r.args[0].value == AF_UNIX;
  });
}

TEST(Placement, BrokerBelowAbi9IsAnInheritedConnection) {
  TempTree tree;
  const Policy broker = tree.Runner("\"broker\": \"" + tree.MakeSocket("broker.sock") + "\"");
  for (int abi : {6, 7, 8}) {
    const Plan plan = PlanConfinement(broker, FakeHost(abi));
    EXPECT_EQ(plan.placement.verdict, Verdict::kOk) << abi;
    EXPECT_EQ(plan.broker, BrokerHandoff::kInheritedFd) << abi;
    // socket(AF_UNIX) stays refused: the inherited fd is the only unix socket.
    EXPECT_TRUE(RefusesUnixSockets(plan)) << abi;
    EXPECT_EQ(FindRule(plan, tree.Path("broker.sock")), nullptr) << abi;
  }
  const CapabilityStatus s = Assess(CapabilityId::kIpcBrokerOnly, FakeHost(7));
  EXPECT_EQ(s.status, Status::kEnforced);
  EXPECT_NE(s.detail.find("OARBANK_BROKER=fd:N"), std::string::npos) << s.detail;
  // Without seccomp there is nothing to keep the module from opening others.
  HostFacts no_seccomp = FakeHost(7);
  no_seccomp.seccomp_filter = false;
  EXPECT_EQ(Assess(CapabilityId::kIpcBrokerOnly, no_seccomp).status, Status::kUnavailable);
}

TEST(Placement, BrokerFromAbi9IsThePathAlone) {
  TempTree tree;
  const Policy broker = tree.Runner("\"broker\": \"" + tree.MakeSocket("broker.sock") + "\"");
  const Plan plan = PlanConfinement(broker, FakeHost(9));
  ASSERT_EQ(plan.placement.verdict, Verdict::kOk);
  EXPECT_EQ(plan.broker, BrokerHandoff::kPath);
  const PathRule* rule = FindRule(plan, tree.Path("broker.sock"));
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->access, kFsResolveUnix);
  EXPECT_FALSE(RefusesUnixSockets(plan));
  EXPECT_NE(Assess(CapabilityId::kIpcBrokerOnly, FakeHost(9)).detail.find("unix:/path"), std::string::npos);
  // No broker: no handoff, and no unix socket at any ABI.
  const Plan none = PlanConfinement(tree.Runner(), FakeHost(9));
  EXPECT_EQ(none.broker, BrokerHandoff::kNone);
  EXPECT_TRUE(RefusesUnixSockets(none));
}

TEST(Plan, WritableGrantsMakeFilesButNoDeviceNodes) {
  TempTree tree;
  for (int abi = 1; abi <= kNewestKnownAbiNumber; ++abi) {
    const uint64_t rights = ReadWriteRights(static_cast<LandlockAbi>(abi), true);
    EXPECT_EQ(rights & (kFsMakeChar | kFsMakeBlock | kFsIoctlDev), 0u) << "ABI " << abi;
    EXPECT_EQ(rights & (kFsMakeReg | kFsMakeDir | kFsMakeSym | kFsMakeFifo | kFsMakeSock),
              kFsMakeReg | kFsMakeDir | kFsMakeSym | kFsMakeFifo | kFsMakeSock)
        << "ABI " << abi;
  }
  const PathRule* work = FindRule(PlanConfinement(tree.Runner(), FakeHost(7)), tree.Path("work"));
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->access & (kFsMakeChar | kFsMakeBlock), 0u);
  // Still handled: a right left out of the handled set would be allowed.
  EXPECT_NE(PlanConfinement(tree.Runner(), FakeHost(7)).landlock.handled_fs & kFsMakeChar, 0u);
}

// Without REFER handled Landlock refuses every rename or link that changes
// a file's directory; handled, the grants that have it may (the mutation
// analysis's landlock.fs.refer is explained by this).
TEST(Plan, ReferIsHandledFromAbi2) {
  TempTree tree;
  EXPECT_EQ(PlanConfinement(tree.Runner(), FakeHost(1)).landlock.handled_fs & kFsRefer, 0u);
  for (int abi = 2; abi <= 7; ++abi)
    EXPECT_NE(PlanConfinement(tree.Runner(), FakeHost(abi)).landlock.handled_fs & kFsRefer, 0u) << abi;
  EXPECT_NE(FindRule(PlanConfinement(tree.Runner(), FakeHost(7)), tree.Path("work"))->access & kFsRefer, 0u);
}

TEST(Plan, WritableGrantsLoseExecuteUnlessExecWritable) {
  TempTree tree;
  const Plan strict = PlanConfinement(tree.Runner(), FakeHost(7));
  const PathRule* work = FindRule(strict, tree.Path("work"));
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->access & kFsExecute, 0u);
  EXPECT_NE(work->access & kFsWriteFile, 0u);
  EXPECT_NE(work->access & kFsTruncate, 0u);
  const std::vector<std::string> writable = {tree.Path("work"), tree.Path("data"), tree.Path("work/tmp")};
  EXPECT_EQ(strict.writable_binds, writable);
  EXPECT_TRUE(strict.writable_noexec);
  const Plan open = PlanConfinement(tree.Runner(R"("exec_writable": true)"), FakeHost(7));
  EXPECT_NE(FindRule(open, tree.Path("work"))->access & kFsExecute, 0u);
  // The namespace stays: everything but the writable grants is read-only.
  EXPECT_TRUE(open.read_only_mounts);
  EXPECT_EQ(open.writable_binds, writable);
  EXPECT_FALSE(open.writable_noexec);
}

TEST(Plan, ReadOnlyCarveOutsAreBoundAndAddNoLandlockRule) {
  TempTree tree;
  std::filesystem::create_directories(tree.Path("work/.git"));
  const Plan plan = PlanConfinement(tree.Runner(R"("read_only": [")" + tree.Path("work/.git") + R"("])"), FakeHost(7));
  EXPECT_EQ(plan.read_only_binds, std::vector<std::string>{tree.Path("work/.git")});
  EXPECT_EQ(FindRule(plan, tree.Path("work/.git")), nullptr);
  EXPECT_TRUE(PlanConfinement(tree.Runner(), FakeHost(7)).read_only_binds.empty());
}

TEST(Plan, AWritableGrantInsideAnotherIsBoundAfterIt) {
  TempTree tree;
  // A state directory inside another, listed first: the outer one is bound
  // first whatever the policy's order, so its bind never hides the inner one.
  std::filesystem::create_directories(tree.Path("outside/state/inner"));
  const Plan plan = PlanConfinement(tree.Runner(R"("state": [")" + tree.Path("outside/state/inner") + R"(", ")" +
                                                tree.Path("outside/state") + R"("])"),
                                    FakeHost(7));
  const auto& binds = plan.writable_binds;
  const auto outer = std::find(binds.begin(), binds.end(), tree.Path("outside/state"));
  const auto inner = std::find(binds.begin(), binds.end(), tree.Path("outside/state/inner"));
  ASSERT_NE(outer, binds.end());
  ASSERT_NE(inner, binds.end());
  EXPECT_LT(outer, inner);
}

TEST(Plan, MetadataOutsideTheGrantsNeedsAMountNamespace) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  EXPECT_EQ(Assess(CapabilityId::kFilesystemMetadata, host).status, Status::kEnforced);
  host.user_namespaces = false;
  host.user_namespaces_detail = "kernel.apparmor_restrict_unprivileged_userns is 1";
  const CapabilityStatus metadata = Assess(CapabilityId::kFilesystemMetadata, host);
  EXPECT_EQ(metadata.status, Status::kUnavailable);
  EXPECT_NE(metadata.detail.find("apparmor_restrict_unprivileged_userns"), std::string::npos) << metadata.detail;
  // Always on: exec_writable true refuses too, naming the capability.
  const Plan plan = PlanConfinement(tree.Runner(R"("exec_writable": true)"), host);
  EXPECT_EQ(plan.placement.verdict, Verdict::kCapabilityNotEnforced);
  bool named = false;
  for (const auto& fault : plan.placement.at_fault) named |= fault.id == CapabilityId::kFilesystemMetadata;
  EXPECT_TRUE(named);
}

TEST(Plan, ReadExecuteGrantsNeverWrite) {
  TempTree tree;
  const Plan plan = PlanConfinement(tree.Runner(), FakeHost(kNewestKnownAbiNumber));
  for (const auto& rule : plan.landlock.paths) {
    if (rule.source == "bundle" || rule.source == "runtime" || rule.source == "base system") {
      EXPECT_EQ(rule.access & (kFsWriteFile | kFsRemoveFile | kFsMakeReg | kFsTruncate | kFsRefer), 0u) << rule.path;
    }
  }
}

TEST(Plan, RootGetsOnlyTheWorldReadablePartsOfEtc) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  host.runs_as_root = true;
  host.etc_world_readable = {"/etc/passwd", "/etc/ssh/ssh_config", "/etc/ssl/certs"};
  const Plan plan = PlanConfinement(tree.Runner(), host);
  const PathRule* etc = FindRule(plan, "/etc");
  ASSERT_NE(etc, nullptr);
  EXPECT_EQ(etc->access, kFsReadDir);  // list it, read nothing through it
  for (const auto& part : host.etc_world_readable) {
    const PathRule* rule = FindRule(plan, part);
    ASSERT_NE(rule, nullptr) << part;
    EXPECT_EQ(rule->access, ReadExecuteRights(LandlockAbi::kV7));
  }
  EXPECT_EQ(FindRule(plan, "/etc/shadow"), nullptr);
  // Everyone else keeps /etc whole: file permissions guard its root-only files.
  EXPECT_EQ(FindRule(PlanConfinement(tree.Runner(), FakeHost(7)), "/etc")->access, ReadExecuteRights(LandlockAbi::kV7));
}

TEST(Plan, RootWithAnIdmappedEtcKeepsEtcWholeAndMountsTheView) {
  TempTree tree;
  HostFacts host = FakeHost(7);
  host.runs_as_root = true;
  host.etc_view.idmap = std::make_shared<const UniqueFd>(dup(0));
  const Plan plan = PlanConfinement(tree.Runner(R"("exec_writable": true)"), host);
  EXPECT_TRUE(plan.root_etc_view);
  EXPECT_TRUE(plan.read_only_mounts);
  EXPECT_FALSE(plan.writable_noexec);
  ASSERT_NE(FindRule(plan, "/etc"), nullptr);
  EXPECT_EQ(FindRule(plan, "/etc")->access, ReadExecuteRights(LandlockAbi::kV7));
  // Not root: no view.
  host.runs_as_root = false;
  const Plan nobody = PlanConfinement(tree.Runner(R"("exec_writable": true)"), host);
  EXPECT_FALSE(nobody.root_etc_view);
}

TEST(Plan, EgressConnectsToTheProxyPortAloneAndNeverBinds) {
  TempTree tree;
  const Policy egress =
      tree.Runner(R"("net": {"mode": "egress-allowlist", "allow": ["api.example.org"], "proxy_port": 3128})");
  const Plan plan = PlanConfinement(egress, FakeHost(7));
  ASSERT_EQ(plan.landlock.ports.size(), 1u);
  EXPECT_EQ(plan.landlock.ports[0].port, 3128);
  EXPECT_EQ(plan.landlock.ports[0].access, kNetConnectTcp);
  EXPECT_NE(plan.landlock.handled_net & kNetBindTcp, 0u);
  // net none: no port rule at all, TCP handled, so every connect is refused.
  const Plan none = PlanConfinement(tree.Runner(), FakeHost(7));
  EXPECT_TRUE(none.landlock.ports.empty());
  EXPECT_NE(none.landlock.handled_net & kNetConnectTcp, 0u);
}

// ipc "job": the job's own loopback. No Landlock port rule and no listen,
// bind or IPv4/IPv6 socket row (the job's network namespace confines them),
// but the raw, SCTP and UDP-Lite rows stay, and unix sockets stay refused.
// Placed only under the supervisor: sandbox-exec alone refuses it.
TEST(Plan, TheJobsOwnSocketsTakeNoPortRuleAndNoListenRowUnderTheSupervisor) {
  TempTree tree;
  auto has = [](const Plan& plan, const char* syscall) {
    return std::any_of(plan.seccomp.begin(), plan.seccomp.end(),
                       [&](const SeccompRule& r) { return r.syscall == syscall; });
  };
  auto inet_rows = [](const Plan& plan) {
    return std::count_if(plan.seccomp.begin(), plan.seccomp.end(), [](const SeccompRule& r) {
      return r.syscall == "socket" && !r.args.empty() && r.args[0].op == CmpOp::kEq && r.args[0].value == AF_INET;
    });
  };
  HostFacts supervised = FakeHost(7);
  supervised.job_network.supervised = true;
  for (const char* net : {R"("net": {"mode": "none"})",
                          R"("net": {"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 3128})"}) {
    const Policy without = tree.Runner(net);
    const Policy job = tree.Runner(std::string(net) + R"(, "ipc": "job")");
    EXPECT_EQ(job.ipc(), IpcMode::kJob);
    const Plan a = PlanConfinement(without, supervised), b = PlanConfinement(job, supervised);
    EXPECT_TRUE(has(a, "listen") && has(a, "bind")) << net;
    EXPECT_FALSE(has(b, "listen") || has(b, "bind")) << net;
    EXPECT_NE(a.landlock.handled_net, 0u) << net;
    EXPECT_EQ(b.landlock.handled_net, 0u) << net;
    EXPECT_TRUE(b.landlock.ports.empty()) << net;
    EXPECT_TRUE(RefusesUnixSockets(b)) << net;
    // Only the kinds of IPv4 socket the job network cannot carry: raw, RDM,
    // SEQPACKET, DCCP, PACKET, SCTP and UDP-Lite.
    EXPECT_EQ(inet_rows(b), 7) << net;
    EXPECT_EQ(b.placement.verdict, Verdict::kOk) << PlacementLine(b.placement);
    EXPECT_NE(PolicyClass(job), PolicyClass(without));
    EXPECT_EQ(PolicyClass(job).rfind(" ipc=job"), PolicyClass(job).size() - 8);
  }
  // sandbox-exec alone: the caller's loopback is the host's.
  const Plan alone = PlanConfinement(tree.Runner(R"("ipc": "job")"), FakeHost(7));
  EXPECT_EQ(AtFault(alone), std::set<std::string>{"ipc.job-loopback"});
}

// ipc "job" from ABI 9: the job's own unix sockets. socket(AF_UNIX) and the
// datagram pairs are let through and RESOLVE_UNIX is handled with no path
// granted it (Landlock lets a domain reach the sockets it bound itself, and
// no other: a grant would only open a host's or another job's socket in that
// directory); below ABI 9, or without ipc "job", unix sockets stay refused.
TEST(Plan, TheJobsOwnUnixSocketsFromAbi9AreItsOwnAlone) {
  TempTree tree;
  std::filesystem::create_directories(tree.Path("work/state"));
  HostFacts supervised = FakeHost(9);
  supervised.job_network.supervised = true;
  const Policy job = tree.Runner(R"("ipc": "job", "state": [")" + tree.Path("work/state") + R"("])");
  const Plan plan = PlanConfinement(job, supervised);
  ASSERT_EQ(plan.placement.verdict, Verdict::kOk) << PlacementLine(plan.placement);
  EXPECT_FALSE(RefusesUnixSockets(plan));
  EXPECT_FALSE(std::any_of(plan.seccomp.begin(), plan.seccomp.end(), [](const SeccompRule& r) {
    return r.syscall == "socketpair" && r.when == When::kNoBroker;
  }));
  EXPECT_TRUE(plan.landlock.handled_fs & kFsResolveUnix);
  for (const char* dir : {"work/tmp", "data", "work", "work/state", "bundle"}) {
    const PathRule* rule = FindRule(plan, tree.Path(dir));
    ASSERT_NE(rule, nullptr) << dir;
    EXPECT_FALSE(rule->access & kFsResolveUnix) << dir;
  }
  for (const auto& r : plan.landlock.paths) EXPECT_FALSE(r.access & kFsResolveUnix) << r.path;
  EXPECT_TRUE(JobUnixSockets(job, LandlockAbi::kV9));
  // Below ABI 9 nothing could confine a connect by path.
  HostFacts eight = FakeHost(8);
  eight.job_network.supervised = true;
  const Plan below = PlanConfinement(job, eight);
  EXPECT_TRUE(RefusesUnixSockets(below));
  EXPECT_FALSE(JobUnixSockets(job, LandlockAbi::kV8));
  for (const auto& r : below.landlock.paths) EXPECT_FALSE(r.access & kFsResolveUnix) << r.path;
  // Without ipc "job", ABI 9 changes nothing.
  const Plan none = PlanConfinement(tree.Runner(), supervised);
  EXPECT_TRUE(RefusesUnixSockets(none));
  for (const auto& r : none.landlock.paths) EXPECT_FALSE(r.access & kFsResolveUnix) << r.path;
}

// debug: ptrace and process_vm_readv/writev of the job's own processes;
// pidfd_getfd and kcmp stay refused; under the supervisor only.
TEST(Plan, DebugLiftsTracingOfTheJobsOwnProcessesAlone) {
  TempTree tree;
  auto has = [](const Plan& plan, const char* syscall) {
    return std::any_of(plan.seccomp.begin(), plan.seccomp.end(),
                       [&](const SeccompRule& r) { return r.syscall == syscall; });
  };
  HostFacts supervised = FakeHost(7);
  supervised.job_network.supervised = true;
  const Plan plain = PlanConfinement(tree.Runner(), supervised);
  const Plan debug = PlanConfinement(tree.Runner(R"("debug": true)"), supervised);
  for (const char* lifted : {"ptrace", "process_vm_readv", "process_vm_writev"}) {
    EXPECT_TRUE(has(plain, lifted)) << lifted;
    EXPECT_FALSE(has(debug, lifted)) << lifted;
  }
  for (const char* kept : {"pidfd_getfd", "kcmp"}) EXPECT_TRUE(has(debug, kept)) << kept;
  EXPECT_EQ(debug.placement.verdict, Verdict::kOk) << PlacementLine(debug.placement);
  EXPECT_EQ(AtFault(PlanConfinement(tree.Runner(R"("debug": true)"), FakeHost(7))),
            std::set<std::string>{"debug.job-ptrace"});
  EXPECT_NE(PolicyClass(tree.Runner(R"("debug": true)")).find(" debug=yes"), std::string::npos);
}

// Landlock ABI 10 handles UDP: with no rule, every other mode refuses it (a
// second layer under seccomp), and egress-any leaves sending to its job
// network's ruleset, as it does TCP connects, or its jobs could not resolve.
TEST(Plan, UdpIsHandledFromAbi10AndEgressAnyLeavesItToItsRuleset) {
  TempTree tree;
  const Policy any = tree.Runner(R"("net": {"mode": "egress-any"})");
  const Policy egress =
      tree.Runner(R"("net": {"mode": "egress-allowlist", "allow": ["api.example.org"], "proxy_port": 3128})");
  for (const Policy& p : {tree.Runner(), egress}) {
    const Plan plan = PlanConfinement(p, FakeHost(10));
    EXPECT_EQ(plan.landlock.handled_net & (kNetBindUdp | kNetConnectSendUdp), kNetBindUdp | kNetConnectSendUdp);
    for (const auto& rule : plan.landlock.ports) EXPECT_EQ(rule.access & (kNetBindUdp | kNetConnectSendUdp), 0u);
    EXPECT_EQ(PlanConfinement(p, FakeHost(9)).landlock.handled_net & (kNetBindUdp | kNetConnectSendUdp), 0u);
  }
  const Plan plan = PlanConfinement(any, FakeHost(10));
  EXPECT_EQ(plan.landlock.handled_net & (kNetConnectTcp | kNetConnectSendUdp), 0u);
  EXPECT_NE(plan.landlock.handled_net & kNetBindUdp, 0u);
  EXPECT_NE(plan.landlock.handled_net & kNetBindTcp, 0u);
}

// The filter is the host architecture's: a row for a syscall it lacks is
// dropped with the reason, and ENOSYS starts above its table.
TEST(Plan, SeccompRowsAreTheArchitecturesAndAnyDroppedRowIsSaid) {
  TempTree tree;
  const Plan x86 = PlanConfinement(tree.Runner(), FakeHost(7));
  EXPECT_EQ(x86.seccomp_arch, SeccompArch::kX86_64);
  EXPECT_EQ(x86.seccomp_highest, HighestSyscall(SeccompArch::kX86_64));
  EXPECT_TRUE(x86.seccomp_dropped.empty());
  HostFacts arm = FakeHost(7);
  arm.arch = "aarch64";
  const Plan a64 = PlanConfinement(tree.Runner(), arm);
  EXPECT_EQ(a64.seccomp_arch, SeccompArch::kAarch64);
  // mknod and uselib are x86-64 syscalls only (arm64 has mknodat).
  std::set<std::string> dropped;
  for (const auto& d : a64.seccomp_dropped) {
    dropped.insert(d.rule.syscall);
    EXPECT_NE(d.reason.find(d.rule.syscall + " is not a syscall of aarch64"), std::string::npos) << d.reason;
  }
  EXPECT_EQ(dropped, (std::set<std::string>{"mknod", "uselib"}));
  EXPECT_EQ(a64.seccomp.size() + a64.seccomp_dropped.size(), x86.seccomp.size());
  EXPECT_FALSE(PlanReport(a64)["plan"]["seccomp"]["dropped"].empty());
  EXPECT_EQ(PlanReport(a64)["plan"]["seccomp"]["arch"], "aarch64");
}

TEST(Plan, SeccompRowsFollowThePolicy) {
  TempTree tree;
  const Plan strict = PlanConfinement(tree.Runner(), FakeHost(7));
  for (const char* always : {"io_uring_setup",
                             "io_uring_enter",
                             "io_uring_register",
                             "ptrace",
                             "unshare",
                             "setns",
                             "mount",
                             "fsopen",
                             "fsmount",
                             "move_mount",
                             "open_tree",
                             "fspick",
                             "fsconfig",
                             "bpf",
                             "add_key",
                             "keyctl",
                             "init_module",
                             "finit_module",
                             "perf_event_open",
                             "userfaultfd",
                             "process_vm_readv",
                             "process_vm_writev",
                             "pidfd_getfd",
                             "open_by_handle_at",
                             "listen",
                             "memfd_create",
                             "execveat",
                             "clone3",
                             "clone",
                             "ioctl"})
    EXPECT_TRUE(HasSeccompRule(strict, always)) << always;
  const auto clone3 = std::find_if(strict.seccomp.begin(), strict.seccomp.end(),
                                   [](const SeccompRule& r) { return r.syscall == "clone3"; });
  EXPECT_EQ(clone3->err, ENOSYS);
  const Plan open = PlanConfinement(tree.Runner(R"("exec_writable": true)"), FakeHost(7));
  EXPECT_FALSE(HasSeccompRule(open, "memfd_create"));
  EXPECT_FALSE(HasSeccompRule(open, "execveat"));
}

TEST(Plan, HotSyscallsStayOutOfTheFilter) {
  // Keeps them in the kernel's per-syscall allow cache.
  for (const auto& rule : SeccompRuleTable())
    for (const char* hot : {"read", "write", "futex", "mmap", "getppid", "close", "openat", "fstat", "brk"})
      EXPECT_NE(rule.syscall, hot);
}

TEST(Report, HostReportListsEveryCapability) {
  const auto report = HostReport(FakeHost(7));
  EXPECT_EQ(report["capabilities"].size(), AllCapabilities().size());
  EXPECT_EQ(report["landlock"]["abi"], 7);
}

TEST(Report, ErrataAreNamedFixedOrUnknown) {
  HostFacts host = FakeHost(7);
  host.landlock_errata_known = true;
  host.landlock_errata = 0b101;  // 1 and 3
  auto errata = HostReport(host)["landlock"]["errata_detail"];
  ASSERT_EQ(errata.size(), 4u);
  EXPECT_EQ(errata[0]["erratum"], 1);
  EXPECT_EQ(errata[0]["fixed"], true);
  EXPECT_EQ(errata[1]["fixed"], false);
  EXPECT_EQ(errata[2]["fixed"], true);
  EXPECT_NE(errata[2]["without_the_fix"].get<std::string>().find("read-only"), std::string::npos);
  EXPECT_EQ(errata[3]["erratum"], 4);
  EXPECT_EQ(errata[3]["fixed"], false);
  EXPECT_NE(errata[3]["without_the_fix"].get<std::string>().find("RENAME_WHITEOUT"), std::string::npos);
  // A kernel that cannot be asked: neither fixed nor not.
  host.landlock_errata_known = false;
  host.landlock_errata = 0;
  errata = HostReport(host)["landlock"]["errata_detail"];
  for (const auto& e : errata) EXPECT_TRUE(e["fixed"].is_string()) << e;
}

TEST(Report, PlanReportCarriesTheVerdict) {
  TempTree tree;
  const auto report = PlanReport(PlanConfinement(tree.Runner(), FakeHost(2)));
  EXPECT_EQ(report["placement"]["verdict"], "CAPABILITY_NOT_ENFORCED");
  EXPECT_EQ(report["placement"]["at_fault"][0]["id"], "filesystem");
}

// Properties over every pair of ABIs: a lower ABI never enforces more, and
// every grant is enforced by a rule or listed as a gap.
RC_GTEST_PROP(PlanProperty, LowerAbiNeverEnforcesMore, ()) {
  const int low = *rc::gen::inRange(0, kNewestKnownAbiNumber + 2);
  const int high = *rc::gen::inRange(low, kNewestKnownAbiNumber + 3);
  const LandlockAbi a = ToAbi(low), b = ToAbi(high);
  RC_ASSERT((HandledFs(a) & ~HandledFs(b)) == 0u);
  RC_ASSERT((HandledNet(a) & ~HandledNet(b)) == 0u);
  RC_ASSERT((HandledScopes(a) & ~HandledScopes(b)) == 0u);
  const HostFacts ha = FakeHost(low), hb = FakeHost(high);
  for (auto id : AllCapabilities())
    if (Assess(id, ha).status == Status::kEnforced) RC_ASSERT(Assess(id, hb).status == Status::kEnforced);
}

RC_GTEST_PROP(PlanProperty, EveryGrantIsInThePlanOrTheGaps, ()) {
  static TempTree tree;
  const int abi = *rc::gen::inRange(0, kNewestKnownAbiNumber + 2);
  const bool exec_writable = *rc::gen::arbitrary<bool>();
  const bool egress = *rc::gen::arbitrary<bool>();
  HostFacts host = FakeHost(abi);
  host.user_namespaces = *rc::gen::arbitrary<bool>();
  host.seccomp_filter = *rc::gen::arbitrary<bool>();
  std::string extra = exec_writable ? R"("exec_writable": true)" : R"("exec_writable": false)";
  if (egress) extra += R"(, "net": {"mode": "egress-allowlist", "allow": ["a.example"], "proxy_port": 8080})";
  const Policy policy = tree.Runner(extra);
  const Plan plan = PlanConfinement(policy, host);
  for (const auto& g : policy.grants()) {
    const bool in_plan = std::any_of(plan.landlock.paths.begin(), plan.landlock.paths.end(),
                                     [&](const PathRule& r) { return r.path == g.path && r.access != 0; });
    const bool in_gaps =
        std::any_of(plan.gaps.begin(), plan.gaps.end(), [&](const Gap& x) { return x.field == g.field; });
    RC_ASSERT(in_plan || in_gaps);
  }
  // A plan that runs has no gap, and one with a gap never runs.
  RC_ASSERT((plan.placement.verdict == Verdict::kOk) == plan.gaps.empty());
}

// What the launcher does not probe (LaunchProbeScope) cannot change its
// plan, as the report shows it: the same with every cgroup fact and GPU node
// present as with them left unread, whatever the ABI and policy.
RC_GTEST_PROP(PlanProperty, TheLaunchersProbeScopeLeavesOutNothingThePlanReads, ()) {
  static TempTree tree;
  const int abi = *rc::gen::inRange(0, kNewestKnownAbiNumber + 2);
  const bool gpu = *rc::gen::arbitrary<bool>();
  const bool exec_writable = *rc::gen::arbitrary<bool>();
  std::string extra = exec_writable ? R"("exec_writable": true)" : R"("exec_writable": false)";
  if (gpu) extra += R"(, "devices": {"gpu": "compute"})";
  const Policy policy = tree.Runner(extra);
  HostFacts full = FakeHost(abi);
  full.cgroup = {.probed = true,
                 .v2_mounted = true,
                 .mount_point = "/sys/fs/cgroup",
                 .own_path = "/sys/fs/cgroup/a",
                 .writable = true,
                 .controllers = {"cpu", "memory", "pids"},
                 .has_kill = true,
                 .error = ""};
  full.gpu_nodes = {"/dev/dri", "/dev/kfd"};
  HostFacts scoped = full;
  const ProbeScope scope = LaunchProbeScope(policy);
  RC_ASSERT(scope.gpu_nodes == gpu);
  if (!scope.cgroup) scoped.cgroup = CgroupFacts{};
  if (!scope.gpu_nodes) scoped.gpu_nodes.clear();
  RC_ASSERT(PlanReport(PlanConfinement(policy, full)).dump() == PlanReport(PlanConfinement(policy, scoped)).dump());
}

TEST(Placement, CgroupLimitsAreUnavailableWhenTheProbeDidNotLook) {
  HostFacts host = FakeHost(7);
  host.cgroup = {.probed = false,
                 .v2_mounted = true,
                 .mount_point = "/sys/fs/cgroup",
                 .own_path = "/sys/fs/cgroup/a",
                 .writable = true,
                 .controllers = {"memory"},
                 .has_kill = true,
                 .error = ""};
  const auto memory = Assess(CapabilityId::kLimitsMemory, host);
  EXPECT_EQ(memory.status, Status::kUnavailable);
  EXPECT_EQ(memory.detail, "memory.max needs a cgroup v2 hierarchy; this probe did not look");
  host.cgroup.probed = true;
  EXPECT_EQ(Assess(CapabilityId::kLimitsMemory, host).status, Status::kEnforced);
}

// The job's own devpts and /dev/shm are granted only to a supervised job,
// which mounts them (job_devices.h); sandbox-exec's plan grants no /dev
// beyond the base devices. /dev/shm is never executable.
TEST(JobDevices, GrantedOnlyWhereTheSupervisorMountsThem) {
  TempTree tree;
  Plan plan = PlanConfinement(tree.Runner(), FakeHost(7));
  auto rule = [&](const std::string& path) { return FindRule(plan, path); };
  EXPECT_FALSE(plan.job_devices.enabled);
  for (const char* path : {"/dev/pts", "/dev/ptmx", "/dev/tty", "/dev/shm"}) EXPECT_EQ(rule(path), nullptr) << path;
  PlanJobDevices(plan, 8 << 20);
  EXPECT_TRUE(plan.job_devices.enabled);
  EXPECT_EQ(plan.job_devices.shm_bytes, 8u << 20);
  EXPECT_EQ(plan.job_devices.shm_inodes, kShmInodes);
  ASSERT_NE(rule("/dev/pts"), nullptr);
  ASSERT_NE(rule("/dev/shm"), nullptr);
  ASSERT_NE(rule("/dev/ptmx"), nullptr);
  EXPECT_EQ(rule("/dev/pts")->access, kFsReadFile | kFsWriteFile | kFsReadDir | kFsIoctlDev);
  EXPECT_EQ(rule("/dev/ptmx")->access, kFsReadFile | kFsWriteFile | kFsIoctlDev);
  EXPECT_EQ(rule("/dev/shm")->access & (kFsExecute | kFsMakeChar | kFsMakeBlock | kFsIoctlDev), 0u);
  EXPECT_NE(rule("/dev/shm")->access & kFsMakeReg, 0u);
}

}  // namespace
}  // namespace oarbank

namespace oarbank {
namespace {

// A cgroup hierarchy whose facts could not be read makes every limit
// unavailable, and the line says which file and why.
TEST(CgroupLimits, AnUnreadableHierarchyMakesEveryLimitUnavailableNamingIt) {
  HostFacts h;
  ReadCgroupFacts(h.cgroup, "/nonexistent/mountinfo", "/proc/self/cgroup");
  for (CapabilityId id : {CapabilityId::kLimitsMemory, CapabilityId::kLimitsCpu}) {
    const CapabilityStatus limit = Assess(id, h);
    EXPECT_EQ(limit.status, Status::kUnavailable);
    EXPECT_NE(limit.detail.find("cannot be read: /nonexistent/mountinfo: absent"), std::string::npos) << limit.detail;
  }
}

}  // namespace
}  // namespace oarbank
