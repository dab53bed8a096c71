// oarbank-agent: the launcher (sandbox-exec) and the enforcement report
// (sandbox-report). The flow reads top to bottom:
//   policy -> host facts -> plan (placement) -> confine -> exec.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "enforce.h"
#include "exit_codes.h"
#include "host_facts.h"
#include "plan.h"
#include "policy.h"
#include "report.h"

namespace oarbank {
namespace {

#ifdef OARBANK_FAULT_INJECTION
// Test-only, compiled into oarbank-agent-faulty and never into
// oarbank-agent: breaks one rule of the plan on purpose, so a test can show
// that the battery turns the matching probe red. The variables are removed
// before the module runs.
void InjectFaults(Plan& plan) {
  if (const char* syscall = getenv("OARBANK_FAULT_DROP_SECCOMP")) {
    std::erase_if(plan.seccomp, [&](const SeccompRule& r) { return r.syscall == syscall; });
  }
  if (const char* bit = getenv("OARBANK_FAULT_UNHANDLE_FS")) {
    const uint64_t right = 1ull << atoi(bit);
    plan.landlock.handled_fs &= ~right;
    for (auto& rule : plan.landlock.paths) rule.access &= ~right;
  }
  if (getenv("OARBANK_FAULT_UNHANDLE_SCOPES")) plan.landlock.scoped = 0;
  for (const char* v : {"OARBANK_FAULT_DROP_SECCOMP", "OARBANK_FAULT_UNHANDLE_FS", "OARBANK_FAULT_UNHANDLE_SCOPES"})
    unsetenv(v);
}
#endif

int SandboxExec(const std::string& policy_path, std::vector<std::string> argv, int abi_cap) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return kExitUsage;
  }
  const HostFacts host = ProbeHost(abi_cap);
  Plan plan = PlanConfinement(policy.value(), host);
#ifdef OARBANK_FAULT_INJECTION
  InjectFaults(plan);
#endif
  if (plan.placement.verdict != Verdict::kOk) {
    fprintf(stderr, "%s\n", PlacementLine(plan.placement).c_str());
    return kExitNotEnforced;
  }
  if (auto failure = ConfineSelf(plan)) {
    fprintf(stderr, "%s\n", StepFailureLine(*failure).c_str());
    return kExitNotEnforced;
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  ExecModule(args.data());
  const int err = errno;
  fprintf(stderr, "sandbox: exec: %s: %s\n", argv[0].c_str(), strerror(err));
  return kExitExecFailed;
}

int SandboxReport(const std::string& policy_path, int abi_cap) {
  const HostFacts host = ProbeHost(abi_cap);
  nlohmann::ordered_json report = HostReport(host);
  if (!policy_path.empty()) {
    auto policy = LoadPolicyFile(policy_path);
    if (!policy.ok()) {
      fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
      return kExitUsage;
    }
    report.update(PlanReport(PlanConfinement(policy.value(), host)));
  }
  std::cout << report.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace oarbank

int main(int argc, char** argv) {
  using namespace oarbank;
  CLI::App app{"oarbank-agent: run untrusted module code in a kernel-enforced cage"};
  app.require_subcommand(1);
  int abi_cap = -1;
  const char* cap_help = "Use at most this Landlock ABI (testing: can only lower what the kernel offers)";

  std::string exec_policy;
  std::vector<std::string> exec_argv;
  auto* exec = app.add_subcommand("sandbox-exec", "Confine this process per POLICY.json, then exec ARGV");
  exec->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
  exec->add_option("policy", exec_policy, "Policy JSON file")->required();
  exec->add_option("argv", exec_argv, "Command to run confined (after --)")->required();

  std::string report_policy;
  auto* report = app.add_subcommand("sandbox-report", "Print what this host enforces (and a policy's verdict)");
  report->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
  report->add_option("policy", report_policy, "Policy JSON file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fprintf(stderr, "usage: %s\n", e.what());
    return kExitUsage;
  }
  if (exec->parsed()) return SandboxExec(exec_policy, exec_argv, abi_cap);
  return SandboxReport(report_policy, abi_cap);
}
