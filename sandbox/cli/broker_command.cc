#include "sandbox/cli/broker_command.h"

#include "sandbox/broker/server.h"
#include "sandbox/cli/numbers.h"

namespace oarbank {

struct BrokerCommand::Options {
  broker::BrokerArgs args;
};

bool BrokerCommand::Names(const std::string& name) { return name == "broker"; }

BrokerCommand::BrokerCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  broker::BrokerArgs& a = o_->args;
  sub_ = app.add_subcommand("broker", "Serve one job's container broker socket (then run JOB-ARGV, if given)");
  sub_->add_option("--socket", a.socket_path, "The job's broker socket path")->required();
  sub_->add_option("--work", a.work_dir, "The job's work directory")->required();
  sub_->add_option("--data", a.data_dir, "The module's data directory");
  sub_->add_option("--image", a.images, "An approved image: name@sha256:<64 hex>=os/arch (repeatable)");
  sub_->add_option("--job", a.job_id, "The job id (labels oarbank.job=ID)")->required();
  sub_->add_option("--cpus", a.cpus, "The job's CPU reservation")->check(FiniteRange(0.001, 1e6));
  sub_->add_option("--mem-gb", a.mem_gb, "The job's memory reservation (GB)")->check(FiniteRange(0.001, 1e6));
  sub_->add_option("--max-timeout", a.max_timeout_s, "The longest timeout_s a request may ask")
      ->check(FiniteRange(1, 1e7));
  sub_->add_flag("--network-granted", a.network_granted, "The job's policy has an egress grant");
  sub_->add_option("--job-netns", a.job_netns,
                   "The job's network namespace (run --publish-netns): containers with network join it");
  sub_->add_option("--job-proxy-port", a.job_proxy_port,
                   "egress-allowlist jobs: the job's proxy port, set as HTTPS_PROXY/HTTP_PROXY in containers");
  sub_->add_option("--state-dir", a.state_dir, "Podman's storage and configuration for the broker");
  sub_->add_option("--subid-registry", a.subid_registry,
                   "Which subordinate id range each live job holds (a root-owned trust file)");
  sub_->add_option("--job-uid", a.job_uid, "Owner of what containers write (default: the work dir's)")
      ->check(CLI::Range(0L, 4294967294L));
  sub_->add_option("--job-gid", a.job_gid, "Group of what containers write (default: the work dir's)")
      ->check(CLI::Range(0L, 4294967294L));
  sub_->add_option("job-argv", a.job_argv, "Run this job (after --); the broker stops when it exits");
}

std::optional<int> BrokerCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  return broker::BrokerMain(o_->args);
}

}  // namespace oarbank
