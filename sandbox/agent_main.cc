// oarbank-agent: the launcher (sandbox-exec), the enforcement report
// (sandbox-report), the supervised run (run) and the egress proxy
// (egress-proxy, egress_command.h). The launcher's flow reads
// top to bottom:
//   policy -> host facts -> plan (placement) -> confine -> [gate] -> exec.
// `run` spawns the same steps through the supervisor (supervisor.h):
// namespaces, the process container, verification at the gate, timeout.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "egress_command.h"
#include "egress_resolver.h"
#include "broker.h"
#include "broker_handoff.h"
#include "enforce.h"
#include "exit_codes.h"
#include "host_facts.h"
#include "manifest_cli.h"
#include "namespaces.h"
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
  if (getenv("OARBANK_FAULT_WRITABLE_MOUNTS")) plan.read_only_mounts = false;
  for (const char* v : {"OARBANK_FAULT_DROP_SECCOMP", "OARBANK_FAULT_UNHANDLE_FS", "OARBANK_FAULT_UNHANDLE_SCOPES",
                        "OARBANK_FAULT_WRITABLE_MOUNTS"})
    unsetenv(v);
}
#endif

int SandboxExec(const std::string& policy_path, std::vector<std::string> argv, int abi_cap, int gate_fd) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return kExitUsage;
  }
  HostFacts host = ProbeHost(abi_cap, LaunchProbeScope(policy.value()));
  ProbeRootEtc(host);
  Plan plan = PlanConfinement(policy.value(), host);
#ifdef OARBANK_FAULT_INJECTION
  InjectFaults(plan);
#endif
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
    setenv("OARBANK_BROKER", BrokerEnvironmentValue(plan.broker, *policy.value().broker(), broker_fd).c_str(), 1);
  // Root's idmapped /etc: the copy the probe made to prove it works, when
  // this launch is the first to ask (ProbeRootEtc), so it is not made twice.
  const int root_etc_tree = host.etc_view.proof_tree ? host.etc_view.proof_tree->fd() : -1;
  if (auto failure =
          ConfineSelf(plan, {.gate_fd = gate_fd, .root_etc_tree_fd = root_etc_tree, .broker_fd = broker_fd})) {
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
  HostFacts host = ProbeHost(abi_cap);
  ProbeRootEtc(host);
  nlohmann::ordered_json report = HostReport(host);
  if (!policy_path.empty()) {
    auto policy = LoadPolicyFile(policy_path);
    if (!policy.ok()) {
      fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
      return kExitUsage;
    }
    report.update(PlanReport(PlanConfinement(policy.value(), host)));
    // Cage-before-capability: what an agent may grant, given the battery.
    report.update(GrantReport(policy.value(), host));
  }
  report["supervisor"] = cage::SupervisorReport(host);
  // The network a policy's job gets under `run` (sandbox-exec keeps the host's).
  if (!policy_path.empty())
    if (auto policy = LoadPolicyFile(policy_path); policy.ok())
      report["supervisor"]["job_network"] = PlanJobNamespaces(policy.value()).net_detail;
  report["containers"] = broker::ContainerRuntimeReport();
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

int AgentMain(int argc, char** argv) {
  CLI::App app{"oarbank-agent: run untrusted module code in a kernel-enforced cage"};
  app.require_subcommand(1);
  // Only the subcommand named first is registered: a launch pays for every
  // page of CLI11 state and code it touches (half a millisecond for the other
  // seven here). Help, a typo or no subcommand registers them all, so the
  // usage lists every one.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = first == "sandbox-exec" || first == "sandbox-report" || first == "run" ||
                     first == "egress-proxy" || first == "broker" || ManifestCommands::Names(first);
  auto wants = [&](const char* name) { return !known || first == name; };
  int abi_cap = -1;
  const char* cap_help = "Use at most this Landlock ABI (testing: can only lower what the kernel offers)";

  std::string exec_policy;
  std::vector<std::string> exec_argv;
  int gate_fd = -1;
  CLI::App* exec = nullptr;
  if (wants("sandbox-exec")) {
    exec = app.add_subcommand("sandbox-exec", "Confine this process per POLICY.json, then exec ARGV");
    exec->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
    exec->add_option("--gate-fd", gate_fd,
                     "Unix socket: when confined, send 'R' and exec only after the supervisor answers 'G'")
        ->check(CLI::Range(3, 1 << 20));
    exec->add_option("policy", exec_policy, "Policy JSON file")->required();
    exec->add_option("argv", exec_argv, "Command to run confined (after --)")->required();
  }

  std::string report_policy;
  if (wants("sandbox-report")) {
    auto* report = app.add_subcommand("sandbox-report", "Print what this host enforces (and a policy's verdict)");
    report->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
    report->add_option("policy", report_policy, "Policy JSON file");
  }

  std::string run_policy;
  std::vector<std::string> run_argv;
  cage::RunOptions run_options;
  double timeout_s = 0;
  bool run_json = false;
  std::vector<std::string> run_env;
  std::vector<std::string> run_egress_public;
  std::string run_egress_resolver;
  CLI::App* run = nullptr;
  if (wants("run")) {
    run = app.add_subcommand("run", "Run ARGV supervised: namespaces, process container, verified before exec");
    run->add_option("--timeout", timeout_s, "Kill the job after S seconds (0: none)")->check(CLI::Range(0.0, 1e7));
    run->add_flag("--json", run_json, "Print the result as JSON (stdout, stderr, exit_code, signal, refused, fault)");
    run->add_option("--stdout-max", run_options.stdout_max, "Keep at most this many bytes of stdout");
    run->add_option("--stderr-max", run_options.stderr_max, "Keep at most this many bytes of stderr");
    run->add_flag("--hard-limits", run_options.hard_limits, "Enforce limits as memory.max and cpu.max (refused where not)");
    run->add_flag("--unproven", run_options.unproven,
                  "Run even though the battery attestation does not prove the policy's class here (the result says "
                  "\"unproven (operator override)\")");
    run->add_option("--env", run_env, "NAME=VALUE for the job's environment (repeatable)")->allow_extra_args(false);
    run->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
    run->add_option("--egress-test-public-range", run_egress_public,
                    "TEST ONLY: the job's egress proxy treats this CIDR (inside 198.18.0.0/15) as public (repeatable)")
        ->allow_extra_args(false);
    run->add_option("--egress-test-resolver", run_egress_resolver,
                    "TEST ONLY: the job's egress proxy answers lookups from this file");
    run->add_option("policy", run_policy, "Policy JSON file")->required();
    run->add_option("argv", run_argv, "Command to run (after --)")->required();
  }

  egress::ProxyCommandOptions proxy_options;
  CLI::App* proxy = nullptr;
  if (wants("egress-proxy")) {
    proxy = app.add_subcommand("egress-proxy", "Serve the egress allowlist proxy (HTTP CONNECT, plain http://) on loopback");
    proxy->add_option("--listen", proxy_options.listen, "127.0.0.1:PORT or [::1]:PORT (default: the policy's proxy_port)");
    proxy->add_option("--allow", proxy_options.allow, "host[:port], '*.' for subdomains, 443 by default (repeatable)");
    proxy->add_option("--policy", proxy_options.policy, "Take the list and the port from this policy's net");
    proxy->add_option("--header-timeout", proxy_options.header_timeout_s, "Seconds to send a request head")->check(CLI::Range(0.01, 3600.0));
    proxy->add_option("--idle-timeout", proxy_options.idle_timeout_s, "Close a connection idle this many seconds")->check(CLI::Range(0.01, 1e6));
    proxy->add_option("--connect-timeout", proxy_options.connect_timeout_s, "Seconds to connect upstream")->check(CLI::Range(0.01, 3600.0));
    proxy->add_option("--max-connections", proxy_options.max_connections, "Connections at once")->check(CLI::Range(1, 1 << 20));
    proxy->add_option("--max-header-bytes", proxy_options.max_header_bytes, "Largest request head")->check(CLI::Range(256, 1 << 20));
    proxy->add_option("--test-public-range", proxy_options.test_public_ranges,
                      "TEST ONLY: treat this CIDR (inside 198.18.0.0/15) as public (repeatable)");
    proxy->add_option("--test-resolver", proxy_options.test_resolver,
                      "TEST ONLY: answer lookups from this file (NAME ADDR[,ADDR] [next answer...])");
  }
  broker::BrokerArgs broker_args;
  CLI::App* brk = nullptr;
  if (wants("broker")) {
    brk = app.add_subcommand("broker", "Serve one job's container broker socket (then run JOB-ARGV, if given)");
    brk->add_option("--socket", broker_args.socket_path, "The job's broker socket path")->required();
    brk->add_option("--work", broker_args.work_dir, "The job's work directory")->required();
    brk->add_option("--data", broker_args.data_dir, "The module's data directory");
    brk->add_option("--image", broker_args.images, "An approved image: name@sha256:<64 hex>=os/arch (repeatable)");
    brk->add_option("--job", broker_args.job_id, "The job id (labels oarbank.job=ID)")->required();
    brk->add_option("--cpus", broker_args.cpus, "The job's CPU reservation");
    brk->add_option("--mem-gb", broker_args.mem_gb, "The job's memory reservation (GB)");
    brk->add_option("--max-timeout", broker_args.max_timeout_s, "The longest timeout_s a request may ask");
    brk->add_flag("--network-granted", broker_args.network_granted, "The job's policy has an egress grant");
    brk->add_option("--state-dir", broker_args.state_dir, "Podman's storage and configuration for the broker");
    brk->add_option("--subid-registry", broker_args.subid_registry,
                    "Which subordinate id range each live job holds (a root-owned trust file)");
    brk->add_option("--job-uid", broker_args.job_uid, "Owner of what containers write (default: the work dir's)");
    brk->add_option("--job-gid", broker_args.job_gid, "Group of what containers write (default: the work dir's)");
    brk->add_option("job-argv", broker_args.job_argv, "Run this job (after --); the broker stops when it exits");
  }
  std::optional<ManifestCommands> manifest_commands;  // manifest-check, approve, manifest-policy (manifest_cli.h)
  if (!known || ManifestCommands::Names(first)) manifest_commands.emplace(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!known && !first.empty() && first[0] != '-') {
      std::string names;
      for (const auto* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      fprintf(stderr, "usage: unknown command %s (one of: %s)\n", first.c_str(), names.c_str());
    } else {
      fprintf(stderr, "usage: %s\n", e.what());
    }
    return kExitUsage;
  }
  if (proxy && proxy->parsed()) return egress::RunEgressProxyCommand(proxy_options);
  if (brk && brk->parsed()) return broker::BrokerMain(broker_args);
  if (manifest_commands)
    if (auto status = manifest_commands->Run()) return *status;
  if (exec && exec->parsed()) return SandboxExec(exec_policy, exec_argv, abi_cap, gate_fd);
  if (run && run->parsed()) {
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
    for (const auto& r : run_egress_public) {
      auto cidr = egress::ParseTestPublicRange(r);
      if (!cidr.ok()) {
        fprintf(stderr, "usage: --egress-test-public-range %s: %s\n", r.c_str(), cidr.error().what.c_str());
        return kExitUsage;
      }
      run_options.egress.test_public.push_back(cidr.value());
    }
    if (!run_egress_resolver.empty())
      run_options.egress.resolver = std::make_shared<egress::FileResolver>(run_egress_resolver);
    return SupervisedRun(run_policy, run_argv, run_options, run_json);
  }
  return SandboxReport(report_policy, abi_cap);
}

}  // namespace
}  // namespace oarbank

// An exception nothing expected ends the command with one line and exit 70
// (EX_SOFTWARE), never with abort(): before exec that means no module ran.
int main(int argc, char** argv) {
  try {
    return oarbank::AgentMain(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "oarbank-agent: internal error: %s\n", e.what());
    return oarbank::kExitNotEnforced;
  }
}
