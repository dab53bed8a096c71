#include "sandbox/cli/manifest_commands.h"

#include "sandbox/cli/numbers.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/install_paths.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/manifest/approval.h"
#include "sandbox/manifest/manifest.h"
#include "sandbox/manifest/manifest_policy.h"
#include "sandbox/manifest/portability.h"
#include "sandbox/manifest/tool_registry.h"

namespace oarbank {
namespace {

inline constexpr const char* kDefaultApprovals = OARBANK_STATE_DIR "/approvals.json";

std::string FromEnv(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

}  // namespace

struct ManifestCommands::Options {
  CLI::App* check = nullptr;
  CLI::App* approve = nullptr;
  CLI::App* policy = nullptr;
  std::string manifest;
  bool json = false;
  std::string by;
  std::string approvals = FromEnv("OARBANK_APPROVALS", kDefaultApprovals);
  std::string registry = FromEnv("OARBANK_TOOL_REGISTRY", kDefaultToolRegistry);
  std::string role = "runner";
  JobDirs job;
  std::string runtime, work, data, tmp, broker;
  double mem_gb = 0, cpus = 0;
  std::string tools_file;
  std::string out;
};

bool ManifestCommands::Names(const std::string& name) {
  return name == "manifest-check" || name == "approve" || name == "manifest-policy";
}

ManifestCommands::ManifestCommands(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  o.check = app.add_subcommand("manifest-check", "A manifest's canonical requests, digest, flags and portability lint");
  o.check->add_option("manifest", o.manifest, "Module manifest (TOML)")->required();
  o.check->add_flag("--json", o.json, "Print JSON");

  o.approve = app.add_subcommand("approve", "Record an operator's approval of a manifest's exact requests");
  o.approve->add_option("manifest", o.manifest, "Module manifest (TOML)")->required();
  o.approve->add_option("--by", o.by, "The approving operator")->required();
  o.approve->add_option("--approvals", o.approvals, "Approval store (JSON; $OARBANK_APPROVALS)");

  o.policy = app.add_subcommand("manifest-policy", "The Policy JSON for a job of an approved manifest");
  o.policy->add_option("manifest", o.manifest, "Module manifest (TOML)")->required();
  o.policy->add_option("--role", o.role, "coordinator, runner, service or probe")
      ->check(CLI::IsMember({"coordinator", "runner", "service", "probe"}));
  o.policy->add_option("--bundle", o.job.bundle, "The module's bundle directory")->required();
  o.policy->add_option("--runtime", o.runtime, "The runtime directory or file");
  o.policy->add_option("--work", o.work, "The job's work directory (runner)");
  o.policy->add_option("--data", o.data, "The module's data directory");
  o.policy->add_option("--tmp", o.tmp, "The private tmp (inside work for a runner, inside data otherwise)");
  o.policy->add_option("--broker", o.broker, "The job's broker socket (containers)");
  o.policy->add_option("--proxy-port", o.job.proxy_port, "The agent's egress proxy port (egress-allowlist)")
      ->check(CLI::Range(1, 65535));
  o.policy->add_option("--mem-gb", o.mem_gb, "limits.mem_gb")->check(FiniteRange(1e-6, 1e6));
  o.policy->add_option("--cpus", o.cpus, "limits.cpus")->check(FiniteRange(1e-6, 1e6));
  o.policy->add_option("--registry", o.registry, "Tool registry (TOML; $OARBANK_TOOL_REGISTRY)");
  o.policy->add_option("--approvals", o.approvals, "Approval store (JSON; $OARBANK_APPROVALS)");
  o.policy->add_option("--tools-file", o.tools_file, "Write the OARBANK_TOOLS_FILE for the module here");
  o.policy->add_option("-o,--out", o.out, "Write the Policy JSON here (default: stdout)");
}

namespace {

// manifest-check: the requests, their digest and flags, and portability.
int RunCheck(const Manifest& m, bool json) {
  const auto lint = LintPortability(m, ProbeHost());
  if (json) {
    nlohmann::ordered_json j = {
        {"format", kManifestCheckFormat}, {"module", m.name},
        {"version", m.version},           {"requests", nlohmann::json::parse(CanonicalRequests(m))},
        {"digest", RequestsDigest(m)},    {"needs_approval", !m.RequestsNothing()},
        {"flags", ApprovalFlags(m)},      {"portability", PortabilityJson(lint)}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << m.name << " " << m.version << "\nrequests: " << CanonicalRequests(m)
              << "\ndigest: " << RequestsDigest(m)
              << "\napproval: " << (m.RequestsNothing() ? "not needed (requests nothing)" : "needed") << "\n";
    for (const auto& f : ApprovalFlags(m)) std::cout << "flag: " << f << "\n";
    std::cout << PortabilityText(lint);
  }
  return 0;
}

// manifest-approve: an approval record of the requests' digest, appended.
int RunApprove(const Manifest& m, const ManifestCommands::Options& o) {
  if (m.RequestsNothing()) {
    std::cout << m.name << " " << m.version << " requests nothing: it needs no approval\n";
    return 0;
  }
  auto record = MakeApproval(m, o.by, UtcNow());
  if (!record.ok()) {
    fprintf(stderr, "%s\n", ErrorLineWithPrefix("approve", record.error()).c_str());
    return kExitUsage;
  }
  if (auto e = AppendApproval(o.approvals, record.value())) {
    fprintf(stderr, "%s\n", ErrorLineWithPrefix("approve", *e).c_str());
    return kExitUsage;
  }
  std::cout << "approved " << m.name << " " << m.version << " " << record.value().digest << " by " << record.value().who
            << " at " << record.value().when << "\nrequests: " << CanonicalRequests(m) << "\n";
  for (const auto& f : ApprovalFlags(m)) std::cout << "flag: " << f << "\n";
  return 0;
}

// manifest-policy: the runner policy an approved manifest gets.
int RunManifestPolicy(const Manifest& m, const ManifestCommands::Options& o) {
  auto approvals = LoadApprovals(o.approvals);
  if (!approvals.ok()) {
    fprintf(stderr, "%s\n", ErrorLineWithPrefix("approvals", approvals.error()).c_str());
    return kExitUsage;
  }
  if (auto refused = CheckApproved(m, approvals.value())) {
    fprintf(stderr, "%s\n", ErrorLineWithPrefix("manifest-policy", *refused).c_str());
    return kExitNotApproved;
  }
  ToolRegistry registry{o.registry, {}};
  if (!m.sandbox.tools.empty()) {
    auto loaded = LoadToolRegistryFile(o.registry);
    if (!loaded.ok()) {
      fprintf(stderr, "%s\n", ErrorLineWithPrefix("registry", loaded.error()).c_str());
      return kExitUsage;
    }
    registry = std::move(loaded).value();
  }
  JobDirs job = o.job;
  job.role = o.role == "coordinator" ? Role::kCoordinator
             : o.role == "service"   ? Role::kService
             : o.role == "probe"     ? Role::kProbe
                                     : Role::kRunner;
  for (auto [value, field] : {std::pair{&o.runtime, &job.runtime},
                              {&o.work, &job.work},
                              {&o.data, &job.data},
                              {&o.tmp, &job.tmp},
                              {&o.broker, &job.broker}})
    if (!value->empty()) *field = *value;
  if (o.mem_gb > 0) job.mem_gb = o.mem_gb;
  if (o.cpus > 0) job.cpus = o.cpus;
  auto policy = ManifestToPolicy(m, approvals.value(), registry, job);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", ErrorLineWithPrefix("manifest-policy", policy.error()).c_str());
    return policy.error().where == "approval" ? kExitNotApproved : kExitUsage;
  }
  if (!o.tools_file.empty())
    if (auto e = WriteToolsFile(o.tools_file, policy.value().tools)) {
      fprintf(stderr, "%s\n", ErrorLineWithPrefix("manifest-policy", *e).c_str());
      return kExitUsage;
    }
  if (o.out.empty()) {
    std::cout << policy.value().policy_json << "\n";
  } else {
    std::ofstream out(o.out, std::ios::trunc);
    out << policy.value().policy_json << "\n";
    if (!out) {
      fprintf(stderr, "manifest-policy: %s: cannot write the policy\n", o.out.c_str());
      return kExitUsage;
    }
  }
  return 0;
}

}  // namespace

std::optional<int> ManifestCommands::Run() const {
  Options& o = *o_;
  if (!o.check->parsed() && !o.approve->parsed() && !o.policy->parsed()) return std::nullopt;
  auto manifest = LoadManifestFile(o.manifest);
  if (!manifest.ok()) {
    fprintf(stderr, "%s\n", ManifestErrorLine(manifest.error()).c_str());
    return kExitUsage;
  }
  if (o.check->parsed()) return RunCheck(manifest.value(), o.json);
  if (o.approve->parsed()) return RunApprove(manifest.value(), o);
  return RunManifestPolicy(manifest.value(), o);
}

}  // namespace oarbank
