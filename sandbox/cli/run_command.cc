#include "sandbox/cli/run_command.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "sandbox/cli/explain_option.h"
#include "sandbox/cli/job_io.h"
#include "sandbox/cli/numbers.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/egress/resolver.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

struct RunCommand::Options {
  std::string policy;
  std::vector<std::string> argv;
  cage::RunOptions run;
  JobIoOptions io;
  JobEgressOptions egress;  // becomes the job's hooks (cage::JobHooks) once parsed
  double timeout_s = 0;
  std::vector<std::string> env;
  std::vector<std::string> egress_public;
  std::string egress_resolver;
  int abi_cap = -1;
  bool explain = false;
};

bool RunCommand::Names(const std::string& name) { return name == "run"; }

RunCommand::RunCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  sub_ = app.add_subcommand("run", "Run ARGV supervised: namespaces, process container, verified before exec");
  sub_->add_option("--timeout", o.timeout_s, "Kill the job after S seconds (0: none; else 0.01 to 1e7)")
      ->check(FiniteRange(kMinTimeoutSeconds, kMaxTimeoutSeconds, /*zero_means_none=*/true));
  AddJobIoOptions(sub_, o.io,
                  "Print the result as JSON (stdout, stderr, exit_code, signal, refused, fault); without it the job's "
                  "output streams to stdout and stderr as it comes");
  sub_->add_flag("--hard-limits", o.run.hard_limits, "Enforce limits as memory.max and cpu.max (refused where not)");
  sub_->add_flag("--unproven", o.run.unproven,
                 "Run even though the battery attestation does not prove the policy's class here (the result says "
                 "\"unproven (operator override)\")");
  sub_->add_option("--env", o.env, "NAME=VALUE for the job's environment (repeatable)")->allow_extra_args(false);
  AddLandlockAbiMax(sub_, o.abi_cap);
  AddExplainOption(sub_, o.explain);
  sub_->add_option("--egress-test-public-range", o.egress_public,
                   "The job's egress proxy treats this CIDR as public; it must lie inside 198.18.0.0/15, the "
                   "benchmarking range no real host uses (the battery's test hosts; repeatable)")
      ->allow_extra_args(false);
  AddTestResolver(sub_, "--egress-test-resolver", o.egress_resolver,
                  "The job's egress proxy answers lookups from this file");
  sub_->add_option("--publish-netns", o.run.publish_netns,
                   "Make a symlink at PATH to the job's network namespace while it runs (for broker --job-netns)");
  sub_->add_option("--egress-max-connections", o.egress.max_connections,
                   "Connections the job may hold through its egress proxy at once (64)")
      ->check(CLI::Range(1, 1 << 20));
  sub_->add_option("policy", o.policy, "Policy JSON file")->required();
  sub_->add_option("argv", o.argv, "Command to run (after --)")->required();
}

std::optional<int> RunCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  const Options& o = *o_;
  cage::RunOptions options = o.run;
  options.timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
  options.landlock_abi_max = o.abi_cap;
  if (!ParseEnvOptions(o.env, options.env)) return kExitUsage;
  cage::JobHooks hooks;
  if (!SetEgress(o.egress, o.egress_public, o.egress_resolver, hooks)) return kExitUsage;
  auto policy = LoadPolicyFile(o.policy);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return PolicyErrorExit(policy.error());
  }
  if (!ApplyJobIo(o.io, WritableGrants(policy.value()), options)) return kExitUsage;
  std::unique_ptr<JobExplainer> explainer;
  if (o.explain) {
    int refused = 0;
    explainer = JobExplainer::Prepare(policy.value(), Speaker::kPolicy, hooks, &refused);
    if (!explainer) return refused;
  }
  return RunJobAndReport(
      o.io, options, [&](const cage::RunOptions& opts) { return cage::RunPolicy(policy.value(), o.argv, opts, hooks); },
      nlohmann::ordered_json::object(),
      explainer ? std::function<JobAfterword()>([&] { return explainer->Explain(); }) : nullptr);
}

}  // namespace oarbank
