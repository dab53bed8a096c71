#include "sandbox/cli/exec_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/fault_hooks.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/launch/broker_handoff.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"
#include "sandbox/plan/report.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/environment.h"

namespace oarbank {

struct ExecCommand::Options {
  std::string policy;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  int gate_fd = -1;
  int abi_cap = -1;
};

namespace {

int SandboxExec(const std::string& policy_path, std::vector<std::string> argv, int abi_cap, int gate_fd,
                std::map<std::string, std::string> named_env) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return PolicyErrorExit(policy.error());
  }
  HostFacts host = ProbeHost(abi_cap, LaunchProbeScope(policy.value()));
  ProbeRootEtc(host);
  Plan plan = PlanConfinement(policy.value(), host);
  FaultMutatePlan(plan);  // test-only build (common/fault_hooks.h)
  if (plan.placement.verdict != Verdict::kOk) {
    fprintf(stderr, "%s\n", PlacementLine(plan.placement).c_str());
    return kExitNotEnforced;
  }
  // The broker grant: an inherited connection below Landlock ABI 9, the
  // path from ABI 9 (broker_handoff.h).
  int broker_fd = -1;
  if (plan.broker == BrokerHandoff::kInheritedFd) {
    auto connected = ConnectBroker(*policy.value().broker());
    if (!connected.ok()) {
      fprintf(stderr, "sandbox: %s: %s\n", connected.error().where.c_str(), connected.error().what.c_str());
      return kExitNotEnforced;
    }
    broker_fd = connected.value();
  }
  if (plan.broker != BrokerHandoff::kNone)
    named_env["OARBANK_BROKER"] = BrokerEnvironmentValue(plan.broker, *policy.value().broker(), broker_fd);
  // The module's environment is built as `run` builds it (environment.h),
  // never the caller's.
  std::vector<std::string> env = BuildModuleEnvironment(policy.value(), named_env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Root's idmapped /etc: the copy the probe made to prove it works, when
  // this launch is the first to ask (ProbeRootEtc), so it is not made twice.
  const int root_etc_tree = host.etc_view.proof_tree ? host.etc_view.proof_tree->get() : -1;
  const int root_etc_idmap = host.etc_view.idmap ? host.etc_view.idmap->get() : -1;
  if (auto failure = ConfineSelf(plan, {.gate_fd = gate_fd,
                                        .root_etc_tree_fd = root_etc_tree,
                                        .root_etc_idmap_fd = root_etc_idmap,
                                        .broker_fd = broker_fd})) {
    fprintf(stderr, "%s\n", StepFailureLine(*failure).c_str());
    return kExitNotEnforced;
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  environ = envp.data();  // exec's PATH search uses it too
  ExecModule(args.data());
  const int err = errno;
  fprintf(stderr, "sandbox: exec: %s: %s\n", argv[0].c_str(), strerror(err));
  return kExitExecFailed;
}

}  // namespace

bool ExecCommand::Names(const std::string& name) { return name == "sandbox-exec"; }

ExecCommand::ExecCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  sub_ = app.add_subcommand("sandbox-exec", "Confine this process per POLICY.json, then exec ARGV");
  AddLandlockAbiMax(sub_, o.abi_cap);
  sub_->add_option("--gate-fd", o.gate_fd,
                   "Unix socket: when confined, send 'R' and exec only after the supervisor answers 'G'")
      ->check(CLI::Range(3, 1 << 20));
  sub_->add_option("--env", o.env,
                   "NAME=VALUE for the module's environment, which is built as run builds it and holds nothing "
                   "of the caller's (repeatable)")
      ->allow_extra_args(false);
  sub_->add_option("policy", o.policy, "Policy JSON file")->required();
  sub_->add_option("argv", o.argv, "Command to run confined (after --)")->required();
}

std::optional<int> ExecCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  std::map<std::string, std::string> named;
  if (!ParseEnvOptions(o_->env, named)) return kExitUsage;
  return SandboxExec(o_->policy, o_->argv, o_->abi_cap, o_->gate_fd, std::move(named));
}

}  // namespace oarbank
