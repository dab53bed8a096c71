// oarbank-agent: the launcher (sandbox-exec), the enforcement report
// (sandbox-report), the supervised run (run) and the egress proxy
// (egress-proxy, sandbox/cli/egress_proxy_command.h). The launcher's flow reads
// top to bottom:
//   policy -> host facts -> plan (placement) -> confine -> [gate] -> exec.
// `run` spawns the same steps through the supervisor (supervisor.h):
// namespaces, the process container, verification at the gate, timeout.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "sandbox/common/json_formats.h"
#include "sandbox/cli/cage_command.h"
#include "sandbox/cli/egress_proxy_command.h"
#include "sandbox/egress/resolver.h"
#include "sandbox/broker/server.h"
#include "sandbox/launch/broker_handoff.h"
#include "sandbox/cli/numbers.h"
#include "sandbox/cli/raw_terminal.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/cli/manifest_commands.h"
#include "sandbox/supervise/namespaces.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"
#include "sandbox/common/read_file.h"
#include "sandbox/plan/report.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/environment.h"
#include "sandbox/supervise/supervisor.h"
#ifdef OARBANK_FAULT_INJECTION
#include "sandbox/cli/fault_injection.h"
#endif

namespace oarbank {
namespace {

// `run`'s numeric bounds. The timeout is enforced by the supervisor's poll
// (millisecond steps, plus the kill): 10 ms is the least it means.
constexpr double kMinTimeoutSeconds = 0.01;
constexpr double kMaxTimeoutSeconds = 1e7;
constexpr uint64_t kMaxInMemoryCap = 16ull << 20;  // a cap kept in memory (and in the JSON)
constexpr uint64_t kMaxSpooledCap = 1ull << 40;    // a cap written to --stdout-file / --stderr-file
constexpr uint64_t kMaxShmSize = 16ull << 30;      // --shm-size

// NAME=VALUE options (--env) into the variables the job's environment
// names; false (and one line) for one without a name.
bool ParseEnvOptions(const std::vector<std::string>& options, std::map<std::string, std::string>& named) {
  for (const auto& kv : options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      fprintf(stderr, "usage: --env: expected NAME=VALUE, got %s\n", kv.c_str());
      return false;
    }
    named[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return true;
}

int SandboxExec(const std::string& policy_path, std::vector<std::string> argv, int abi_cap, int gate_fd,
                std::map<std::string, std::string> named_env) {
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
    named_env["OARBANK_BROKER"] = BrokerEnvironmentValue(plan.broker, *policy.value().broker(), broker_fd);
  // The module's environment is built as `run` builds it (environment.h),
  // never the caller's.
  std::vector<std::string> env = BuildModuleEnvironment(policy.value(), named_env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
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
  environ = envp.data();  // exec's PATH search uses it too
  ExecModule(args.data());
  const int err = errno;
  fprintf(stderr, "sandbox: exec: %s: %s\n", argv[0].c_str(), strerror(err));
  return kExitExecFailed;
}

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
    // Cage-before-capability: what an agent may grant, given the battery.
    report.update(GrantReport(policy.value(), host));
  }
  report["supervisor"] = cage::SupervisorReport(host);
  // The network a policy's job gets under `run` (sandbox-exec keeps the host's).
  if (!policy_path.empty())
    if (auto policy = LoadPolicyFile(policy_path); policy.ok())
{
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

// The supervised run. Without --json the module's output goes to stdout and
// stderr (or only to --stdout-file / --stderr-file), a fault is one
// "sandbox: <fault>: <reason>" line, and the exit status is the module's
// (128+signal when killed), 70 when refused, 71 when exec failed. Once the
// job has run, its status is reported whatever its output holds: 70 always
// means nothing ran.
struct SpoolFiles {
  std::string stdout_path, stderr_path;
};

// Without --json the job's output streams to stdout and stderr as it comes
// (a stream with a --stdout-file / --stderr-file goes only there).
int SupervisedRun(const std::string& policy_path, const std::vector<std::string>& argv, cage::RunOptions options,
                  bool json, const SpoolFiles& spool) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return kExitUsage;
  }
  const bool stream_out = !json && spool.stdout_path.empty();
  const bool stream_err = !json && spool.stderr_path.empty();
  if (stream_out) options.stream_stdout_fd = STDOUT_FILENO;
  if (stream_err) options.stream_stderr_fd = STDERR_FILENO;
  cage::Result result;
  {
    // The caller's terminal is raw only while the job runs on its own.
    std::optional<RawTerminal> raw;
    if (options.pty) raw.emplace(STDIN_FILENO);
    result = cage::RunPolicy(policy.value(), argv, options);
  }
  int status = result.signal != 0 ? 128 + result.signal : result.exit_code;
  switch (result.fault) {
    case cage::Fault::kRefused: status = kExitNotEnforced; break;
    case cage::Fault::kExec: status = kExitExecFailed; break;
    case cage::Fault::kNone:
    case cage::Fault::kTimeout:
    case cage::Fault::kOom: break;
  }
  try {
    if (json) {
      nlohmann::ordered_json report = cage::ResultReport(result);
      report["stdout_file"] = spool.stdout_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spool.stdout_path);
      report["stderr_file"] = spool.stderr_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spool.stderr_path);
      // A reason naming a path that is not UTF-8 is shown with U+FFFD, never refused.
      const std::string text = report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      fwrite(text.data(), 1, text.size(), stdout);
      fputc('\n', stdout);
    } else {
      // What streamed was all of it; a spool file holds up to its cap.
      for (const auto& [cut, dropped, name] :
           {std::tuple{result.stdout_truncated && !stream_out, result.stdout_dropped, "stdout"},
            {result.stderr_truncated && !stream_err, result.stderr_dropped, "stderr"}})
        if (cut) fprintf(stderr, "sandbox: %s cut at the cap: %llu bytes dropped\n", name, (unsigned long long)dropped);
      if (!result.spool_error.empty()) fprintf(stderr, "sandbox: %s\n", result.spool_error.c_str());
      if (result.fault != cage::Fault::kNone)
        fprintf(stderr, "sandbox: %s: %s\n", cage::FaultName(result.fault), result.reason.c_str());
    }
  } catch (const std::exception& e) {
    // Never reached with the encodings above; if it were, the status stands.
    fprintf(stderr, "sandbox: the result could not be printed (%s); the job's status is %d\n", e.what(), status);
  }
  fflush(stdout);
  return status;
}

// Opens a spool file for the job's output: created or truncated, never
// followed through a symlink, and only a regular file.
int OpenSpoolFile(const char* option, const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    if (fd >= 0 && !S_ISREG(st.st_mode))
      fprintf(stderr, "usage: %s %s: not a regular file (%s)\n", option, path.c_str(), FileKindName(st.st_mode));
    else
      fprintf(stderr, "usage: %s %s: %s\n", option, path.c_str(), strerror(err));
    if (fd >= 0) close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int AgentMain(int argc, char** argv) {
  CLI::App app{"oarbank-agent: run untrusted module code in a kernel-enforced cage"};
  app.set_version_flag("--version", [] { return VersionText("oarbank-agent", "/proc/self/exe"); },
                       "Print the version and the launcher's SHA-256 (what a battery attestation binds)");
  app.require_subcommand(1);
  // Only the subcommand named first is registered: a launch pays for every
  // page of CLI11 state and code it touches (half a millisecond for the other
  // seven here). Help, a typo or no subcommand registers them all, so the
  // usage lists every one.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = first == "sandbox-exec" || first == "sandbox-report" || first == "run" || first == "cage" ||
                     first == "egress-proxy" || first == "broker" || ManifestCommands::Names(first);
  auto wants = [&](const char* name) { return !known || first == name; };
  int abi_cap = -1;
  const char* cap_help = "Use at most this Landlock ABI (testing: can only lower what the kernel offers)";

  std::string exec_policy;
  std::vector<std::string> exec_argv;
  std::vector<std::string> exec_env;
  int gate_fd = -1;
  CLI::App* exec = nullptr;
  if (wants("sandbox-exec")) {
    exec = app.add_subcommand("sandbox-exec", "Confine this process per POLICY.json, then exec ARGV");
    exec->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
    exec->add_option("--gate-fd", gate_fd,
                     "Unix socket: when confined, send 'R' and exec only after the supervisor answers 'G'")
        ->check(CLI::Range(3, 1 << 20));
    exec->add_option("--env", exec_env,
                     "NAME=VALUE for the module's environment, which is built as run builds it and holds nothing "
                     "of the caller's (repeatable)")
        ->allow_extra_args(false);
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
  JobEgressOptions run_egress;  // becomes run_options.egress once parsed
  double timeout_s = 0;
  std::string run_stdout_max = "1M", run_stderr_max = "1M";
  SpoolFiles run_spool;
  bool run_json = false;
  std::vector<std::string> run_env;
  std::string run_shm_size = "64M";
  bool run_stdin = false;
  std::vector<std::string> run_egress_public;
  std::string run_egress_resolver;
  CLI::App* run = nullptr;
  if (wants("run")) {
    run = app.add_subcommand("run", "Run ARGV supervised: namespaces, process container, verified before exec");
    run->add_option("--timeout", timeout_s, "Kill the job after S seconds (0: none; else 0.01 to 1e7)")
        ->check(FiniteRange(kMinTimeoutSeconds, kMaxTimeoutSeconds, /*zero_means_none=*/true));
    run->add_flag("--json", run_json,
                  "Print the result as JSON (stdout, stderr, exit_code, signal, refused, fault); without it the job's "
                  "output streams to stdout and stderr as it comes");
    run->add_flag("--stdin", run_stdin,
                  "Relay this process's stdin into the job's (a pipe) until EOF; without it the job's stdin is /dev/null");
    run->add_flag("--pty", run_options.pty,
                  "Run the job on a pseudo-terminal of its own (its stdin, stdout, stderr and controlling terminal), "
                  "relayed to this process's stdin and stdout; stdin is relayed, a terminal there is raw meanwhile");
    run->add_option("--shm-size", run_shm_size,
                    "Size of the job's private /dev/shm tmpfs (K, M, G suffixes; default 64M, at most 16G; charged to "
                    "the job's cgroup)");
    run->add_option("--stdout-max", run_stdout_max,
                    "Keep at most this many bytes of stdout (K, M, G suffixes; default 1M; at most 16M, "
                    "or 1T with --stdout-file)");
    run->add_option("--stderr-max", run_stderr_max, "Keep at most this many bytes of stderr (as --stdout-max)");
    run->add_option("--stdout-file", run_spool.stdout_path,
                    "Write the job's stdout (up to --stdout-max) to this file; memory and JSON keep its first 64 KiB");
    run->add_option("--stderr-file", run_spool.stderr_path, "Write the job's stderr to this file (as --stdout-file)");
    run->add_flag("--hard-limits", run_options.hard_limits, "Enforce limits as memory.max and cpu.max (refused where not)");
    run->add_flag("--unproven", run_options.unproven,
                  "Run even though the battery attestation does not prove the policy's class here (the result says "
                  "\"unproven (operator override)\")");
    run->add_option("--env", run_env, "NAME=VALUE for the job's environment (repeatable)")->allow_extra_args(false);
    run->add_option("--landlock-abi-max", abi_cap, cap_help)->check(CLI::Range(0, 1000));
    run->add_option("--egress-test-public-range", run_egress_public,
                    "TEST ONLY: the job's egress proxy treats this CIDR (inside 198.18.0.0/15) as public (repeatable)")
        ->allow_extra_args(false)
        ->group("");  // TEST ONLY options work but are not listed by --help
    run->add_option("--egress-test-resolver", run_egress_resolver,
                    "TEST ONLY: the job's egress proxy answers lookups from this file")
        ->group("");
    run->add_option("--publish-netns", run_options.publish_netns,
                    "Make a symlink at PATH to the job's network namespace while it runs (for broker --job-netns)");
    run->add_option("--egress-max-connections", run_egress.max_connections,
                    "Connections the job may hold through its egress proxy at once (64)")
        ->check(CLI::Range(1, 1 << 20));
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
    proxy->add_option("--header-timeout", proxy_options.header_timeout_s, "Seconds to send a request head")->check(FiniteRange(0.01, 3600.0));
    proxy->add_option("--idle-timeout", proxy_options.idle_timeout_s, "Close a connection idle this many seconds")->check(FiniteRange(0.01, 1e6));
    proxy->add_option("--connect-timeout", proxy_options.connect_timeout_s, "Seconds to connect upstream")->check(FiniteRange(0.01, 3600.0));
    proxy->add_option("--max-connections", proxy_options.max_connections, "Connections at once")->check(CLI::Range(1, 1 << 20));
    proxy->add_option("--max-connections-per-client", proxy_options.max_connections_per_client,
                      "Connections one client address may hold at once (64)")
        ->check(CLI::Range(1, 1 << 20));
    proxy->add_option("--wildcard-lookups-per-second", proxy_options.wildcard_lookups_per_second,
                      "Lookups a second under each *. entry, a burst of 5 s worth (10; 0: no limit)")
        ->check(CLI::Range(0.0, 1e6));
    proxy->add_option("--max-header-bytes", proxy_options.max_header_bytes, "Largest request head")->check(CLI::Range(256, 1 << 20));
    proxy->add_option("--test-public-range", proxy_options.test_public_ranges,
                      "TEST ONLY: treat this CIDR (inside 198.18.0.0/15) as public (repeatable)")
        ->group("");
    proxy->add_option("--test-resolver", proxy_options.test_resolver,
                      "TEST ONLY: answer lookups from this file (NAME ADDR[,ADDR] [next answer...])")
        ->group("");
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
    brk->add_option("--cpus", broker_args.cpus, "The job's CPU reservation")->check(FiniteRange(0.001, 1e6));
    brk->add_option("--mem-gb", broker_args.mem_gb, "The job's memory reservation (GB)")->check(FiniteRange(0.001, 1e6));
    brk->add_option("--max-timeout", broker_args.max_timeout_s, "The longest timeout_s a request may ask")
        ->check(FiniteRange(1, 1e7));
    brk->add_flag("--network-granted", broker_args.network_granted, "The job's policy has an egress grant");
    brk->add_option("--job-netns", broker_args.job_netns,
                    "The job's network namespace (run --publish-netns): containers with network join it");
    brk->add_option("--job-proxy-port", broker_args.job_proxy_port,
                    "egress-allowlist jobs: the job's proxy port, set as HTTPS_PROXY/HTTP_PROXY in containers");
    brk->add_option("--state-dir", broker_args.state_dir, "Podman's storage and configuration for the broker");
    brk->add_option("--subid-registry", broker_args.subid_registry,
                    "Which subordinate id range each live job holds (a root-owned trust file)");
    brk->add_option("--job-uid", broker_args.job_uid, "Owner of what containers write (default: the work dir's)")
        ->check(CLI::Range(0L, 4294967294L));
    brk->add_option("--job-gid", broker_args.job_gid, "Group of what containers write (default: the work dir's)")
        ->check(CLI::Range(0L, 4294967294L));
    brk->add_option("job-argv", broker_args.job_argv, "Run this job (after --); the broker stops when it exits");
  }
  std::optional<CageCommand> cage_command;  // the Spec on the command line (sandbox/cli/cage_command.h)
  if (wants("cage")) cage_command.emplace(app);
  std::optional<ManifestCommands> manifest_commands;  // manifest-check, approve, manifest-policy (sandbox/cli/manifest_commands.h)
  if (!known || ManifestCommands::Names(first)) manifest_commands.emplace(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
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
  if (cage_command)
    if (auto status = cage_command->Run()) return *status;
  if (exec && exec->parsed()) {
    std::map<std::string, std::string> named;
    if (!ParseEnvOptions(exec_env, named)) return kExitUsage;
    return SandboxExec(exec_policy, exec_argv, abi_cap, gate_fd, std::move(named));
  }
  if (run && run->parsed()) {
    run_options.timeout = std::chrono::milliseconds(std::llround(timeout_s * 1000));
    run_options.landlock_abi_cap = abi_cap;
    for (const auto& [option, text, file, file_option, max] :
         {std::tuple{"--stdout-max", &run_stdout_max, &run_spool.stdout_path, "--stdout-file", &run_options.stdout_max},
          {"--stderr-max", &run_stderr_max, &run_spool.stderr_path, "--stderr-file", &run_options.stderr_max}}) {
      std::string why;
      const auto bytes = ParseByteCount(*text, file->empty() ? kMaxInMemoryCap : kMaxSpooledCap, &why);
      if (!bytes) {
        std::string unused;
        const bool needs_file = file->empty() && ParseByteCount(*text, kMaxSpooledCap, &unused);
        fprintf(stderr, "usage: %s: %s%s%s%s\n", option, why.c_str(), needs_file ? " (more needs " : "",
                needs_file ? file_option : "", needs_file ? ")" : "");
        return kExitUsage;
      }
      *max = static_cast<size_t>(*bytes);
    }
    if (!run_spool.stdout_path.empty() && run_spool.stdout_path == run_spool.stderr_path) {
      fprintf(stderr, "usage: --stdout-file and --stderr-file: the same file %s\n", run_spool.stdout_path.c_str());
      return kExitUsage;
    }
    if (!run_spool.stdout_path.empty() &&
        (run_options.stdout_fd = OpenSpoolFile("--stdout-file", run_spool.stdout_path)) < 0)
      return kExitUsage;
    if (!run_spool.stderr_path.empty() &&
        (run_options.stderr_fd = OpenSpoolFile("--stderr-file", run_spool.stderr_path)) < 0)
      return kExitUsage;
    if (!ParseEnvOptions(run_env, run_options.env)) return kExitUsage;
    {
      std::string why;
      const auto shm = ParseByteCount(run_shm_size, kMaxShmSize, &why);
      if (!shm || *shm < 4096) {
        fprintf(stderr, "usage: --shm-size: %s\n", shm ? "at least 4K" : why.c_str());
        return kExitUsage;
      }
      run_options.shm_max = *shm;
    }
    if (run_stdin) run_options.stdin_fd = STDIN_FILENO;
    if (run_options.pty) {
      run_options.stdin_fd = STDIN_FILENO;
      run_options.terminal_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
    }
    JobEgressOptions egress = run_egress;
    for (const auto& r : run_egress_public) {
      auto cidr = egress::ParseTestPublicRange(r);
      if (!cidr.ok()) {
        fprintf(stderr, "usage: --egress-test-public-range %s: %s\n", r.c_str(), cidr.error().what.c_str());
        return kExitUsage;
      }
      egress.test_public.push_back(cidr.value());
    }
    if (!run_egress_resolver.empty()) egress.resolver = std::make_shared<egress::FileResolver>(run_egress_resolver);
    run_options.egress = std::make_shared<const JobEgressOptions>(std::move(egress));
    return SupervisedRun(run_policy, run_argv, run_options, run_json, run_spool);
  }
  return SandboxReport(report_policy, abi_cap);
}

}  // namespace
}  // namespace oarbank

// An exception nothing expected ends the command with one line and exit 70
// (EX_SOFTWARE), never with abort(): before exec that means no module ran.
int main(int argc, char** argv) {
  try {
#ifdef OARBANK_FAULT_INJECTION
    oarbank::InstallFaultHooks();
#endif
    return oarbank::AgentMain(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "oarbank-agent: internal error: %s\n", e.what());
    return oarbank::kExitNotEnforced;
  }
}
