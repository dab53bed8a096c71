#include "sandbox/cli/report_command.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "sandbox/broker/server.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/plan/plan.h"
#include "sandbox/plan/report.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

struct ReportCommand::Options {
  std::string policy;
  int abi_cap = -1;
};

namespace {

int SandboxReport(const std::string& policy_path, int abi_cap) {
  HostFacts host = ProbeHost(abi_cap);
  ProbeRootEtc(host);
  nlohmann::ordered_json report = {{"format", kReportFormat}};
  report.update(HostReport(host));
  if (!policy_path.empty()) {
    auto policy = LoadPolicyFile(policy_path);
    if (!policy.ok()) {
      fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
      return kExitUsage;
    }
    report.update(PlanReport(PlanConfinement(policy.value(), host)));
    // Cage-before-capability: what an agent may grant, given the battery
    // (for egress-any, with the job network run would use).
    HostFacts granting = host;
    if (policy.value().net().mode == NetMode::kEgressAny) NameJobNetworkParts(granting.job_network);
    report.update(GrantReport(policy.value(), granting));
  }
  report["supervisor"] = cage::SupervisorReport(host);
  // The network a policy's job gets under `run` (sandbox-exec keeps the host's).
  if (!policy_path.empty())
    if (auto policy = LoadPolicyFile(policy_path); policy.ok()) {
      report["supervisor"]["job_network"] = PlanJobNamespaces(policy.value()).net_detail;
      // The placement `run` makes (egress-any is enforced there, never by sandbox-exec alone).
      HostFacts supervised = host;
      supervised.job_network = SupervisedJobNetworkFacts(policy.value().net().mode == NetMode::kEgressAny);
      const Placement placement = Place(policy.value(), supervised);
      nlohmann::ordered_json at_fault = nlohmann::ordered_json::array();
      for (const auto& c : placement.at_fault)
        at_fault.push_back({{"id", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
      report["supervisor"]["placement"] = {{"verdict", VerdictName(placement.verdict)}, {"at_fault", at_fault}};
    }
  report["containers"] = broker::ContainerRuntimeReport();
  std::cout << report.dump(2) << "\n";
  return 0;
}

}  // namespace

bool ReportCommand::Names(const std::string& name) { return name == "sandbox-report"; }

ReportCommand::ReportCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  sub_ = app.add_subcommand("sandbox-report", "Print what this host enforces (and a policy's verdict)");
  AddLandlockAbiMax(sub_, o.abi_cap);
  sub_->add_option("policy", o.policy, "Policy JSON file");
}

std::optional<int> ReportCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  return SandboxReport(o_->policy, o_->abi_cap);
}

}  // namespace oarbank
