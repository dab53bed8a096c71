// oarbank-agent: the launcher (sandbox-exec), the enforcement report
// (sandbox-report) and the supervised run (run). The launcher's flow reads
// top to bottom:
//   policy -> host facts -> plan (placement) -> confine -> [gate] -> exec.
// `run` spawns the same steps through the supervisor (supervisor.h):
// namespaces, the process container, verification at the gate, timeout.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "enforce.h"
#include "exit_codes.h"
#include "host_facts.h"
#include "manifest_cli.h"
#include "plan.h"
#include "policy.h"
#include "report.h"
#include "supervisor.h"

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

int SandboxExec(const std::string& policy_path, std::vector<std::string> argv, int abi_cap, int gate_fd) {
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
  if (auto failure = ConfineSelf(plan, {.gate_fd = gate_fd})) {
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
    // Cage-before-capability: what an agent may grant, given the battery.
    report.update(GrantReport(policy.value(), host, "/proc/self/exe"));
  }
  report["supervisor"] = cage::SupervisorReport(host);
  std::cout << report.dump(2) << "\n";
  return 0;
}

// The supervised run. Without --json the module's output goes to stdout and
// stderr, a fault is one "sandbox: <fault>: <reason>" line, and the exit
// status is the module's (128+signal when killed), 70 when refused, 71 when
// exec failed.
int SupervisedRun(const std::string& policy_path, const std::vector<std::string>& argv, cage::RunOptions options,
                  bool json) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return kExitUsage;
  }
  const cage::Result result = cage::RunPolicy(policy.value(), argv, options);
  if (json) {
    std::cout << cage::ResultReport(result).dump(2) << "\n";
  } else {
    fwrite(result.stdout_text.data(), 1, result.stdout_text.size(), stdout);
    fflush(stdout);
    fwrite(result.stderr_text.data(), 1, result.stderr_text.size(), stderr);
    for (const auto& [cut, dropped, name] : {std::tuple{result.stdout_truncated, result.stdout_dropped, "stdout"},
                                             {result.stderr_truncated, result.stderr_dropped, "stderr"}})
      if (cut) fprintf(stderr, "sandbox: %s cut at the cap: %llu bytes dropped\n", name, (unsigned long long)dropped);
    if (result.fault != cage::Fault::kNone)
      fprintf(stderr, "sandbox: %s: %s\n", cage::FaultName(result.fault), result.reason.c_str());
  }
  switch (result.fault) {
    case cage::Fault::kRefused: return kExitNotEnforced;
    case cage::Fault::kExec: return kExitExecFailed;
    case cage::Fault::kNone:
    case cage::Fault::kTimeout:
    case cage::Fault::kOom: break;
  }
  return result.signal != 0 ? 128 + result.signal : result.exit_code;
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
  int gate_fd = -1;
  exec->add_option("--gate-fd", gate_fd,
                   "Unix socket: when confined, send 'R' and exec only after the supervisor answers 'G'")
      ->check(CLI::Range(3, 1 << 20));
  exec->add_option("policy", exec_policy, "Policy JSON file")->required();
  exec->add_option("argv", exec_argv, "Command to run confined (after --)")->required();

  std::string report_policy;
  auto* report = app.add_subcommand("sandbox-report", "Print what this host enforces (and a policy's verdict)");
  report->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
  report->add_option("policy", report_policy, "Policy JSON file");

  std::string run_policy;
  std::vector<std::string> run_argv;
  cage::RunOptions run_options;
  double timeout_s = 0;
  bool run_json = false;
  std::vector<std::string> run_env;
  auto* run = app.add_subcommand("run", "Run ARGV supervised: namespaces, process container, verified before exec");
  run->add_option("--timeout", timeout_s, "Kill the job after S seconds (0: none)")->check(CLI::Range(0.0, 1e7));
  run->add_flag("--json", run_json, "Print the result as JSON (stdout, stderr, exit_code, signal, refused, fault)");
  run->add_option("--stdout-max", run_options.stdout_max, "Keep at most this many bytes of stdout");
  run->add_option("--stderr-max", run_options.stderr_max, "Keep at most this many bytes of stderr");
  run->add_flag("--hard-limits", run_options.hard_limits, "Enforce limits as memory.max and cpu.max (refused where not)");
  run->add_option("--env", run_env, "NAME=VALUE for the job's environment (repeatable)");
  run->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
  run->add_option("policy", run_policy, "Policy JSON file")->required();
  run->add_option("argv", run_argv, "Command to run (after --)")->required();

  ManifestCommands manifest_commands(app);  // manifest-check, approve, manifest-policy (manifest_cli.h)

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
  if (auto status = manifest_commands.Run()) return *status;
  if (exec->parsed()) return SandboxExec(exec_policy, exec_argv, abi_cap, gate_fd);
  if (run->parsed()) {
    run_options.timeout = std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
    run_options.landlock_abi_cap = abi_cap;
    for (const auto& kv : run_env) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        fprintf(stderr, "usage: --env: expected NAME=VALUE, got %s\n", kv.c_str());
        return kExitUsage;
      }
      run_options.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return SupervisedRun(run_policy, run_argv, run_options, run_json);
  }
  return SandboxReport(report_policy, abi_cap);
}
