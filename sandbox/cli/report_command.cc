#include "sandbox/cli/report_command.h"

#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "sandbox/broker/server.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/plan/plan.h"
#include "sandbox/plan/report.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/job_plan.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

struct ReportCommand::Options {
  std::string policy;
  int abi_cap = -1;
};

namespace {

int SandboxReport(const std::string& policy_path, int abi_cap) {
  std::optional<Policy> policy;
  if (!policy_path.empty()) {
    auto loaded = LoadPolicyFile(policy_path);
    if (!loaded.ok()) {
      fprintf(stderr, "%s\n", PolicyErrorLine(loaded.error()).c_str());
      return PolicyErrorExit(loaded.error());
    }
    policy = loaded.value();
  }
  // What sandbox-exec meets here, and what a job of `run` meets (egress-any
  // is enforced there, never by sandbox-exec alone): each probed as it is.
  HostFacts host = ProbeHost(abi_cap, {.landlock_whiteout = true});
  ProbeRootEtc(host);
  const HostFacts supervised = ProbeSupervisedHost(abi_cap, JobNetworkProbeDepth::kTrial);
  nlohmann::ordered_json report = {{"format", kReportFormat}};
  report.update(HostReport(host));
  if (policy) {
    report.update(PlanReport(PlanConfinement(*policy, host)));
    // Cage-before-capability: what `run` may run, given the battery.
    report.update(GrantReport(*policy, supervised));
  }
  report["supervisor"] = cage::SupervisorReport(supervised, policy ? &*policy : nullptr);
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
