#include "sandbox/manifest/manifest_policy.h"

#include "sandbox/common/parse_error.h"

namespace oarbank {

Expected<nlohmann::ordered_json> BuildPolicyJson(const Manifest& manifest, const std::vector<ResolvedTool>& tools,
                                                 const JobDirs& job) {
  const SandboxRequests& s = manifest.sandbox;
  const bool runner = job.role == Role::kRunner;
  nlohmann::ordered_json p;
  p["contract"] = 1;
  p["role"] = RoleName(job.role);
  p["bundle"] = job.bundle;
  if (job.runtime) p["runtime"] = *job.runtime;
  if (job.role != Role::kCoordinator && !tools.empty()) {
    p["tools"] = nlohmann::ordered_json::array();
    for (const auto& t : tools) {
      nlohmann::ordered_json entry = {{"id", t.id}, {"paths", t.paths}};
      if (t.code_exec) entry["trust"] = "code-exec";
      p["tools"].push_back(std::move(entry));
    }
  }
  if (runner) {
    if (!job.work) return Bad("job.work", "a runner needs its work directory");
    p["work"] = *job.work;
  }
  if (job.data) p["data"] = *job.data;
  if (job.tmp) p["tmp"] = *job.tmp;
  switch (s.net) {
    case NetMode::kNone: p["net"] = {{"mode", "none"}}; break;
    case NetMode::kEgressAllowlist:
      if (job.proxy_port < 1 || job.proxy_port > 65535)
        return Bad("job.proxy_port", "egress-allowlist needs the agent's proxy port (1..65535)");
      p["net"] = {{"mode", "egress-allowlist"}, {"allow", s.allow}, {"proxy_port", job.proxy_port}};
      break;
    case NetMode::kEgressAny: p["net"] = {{"mode", "egress-any"}}; break;
  }
  if (runner && !s.containers.empty()) {
    if (!job.broker) return Bad("job.broker", "containers are requested: the job needs its broker endpoint");
    p["broker"] = *job.broker;
  }
  switch (s.gpu) {
    case GpuMode::kNone: break;
    case GpuMode::kCompute: p["devices"] = {{"gpu", "compute"}}; break;
  }
  // Only a runner may execute what it wrote.
  p["exec_writable"] = runner && s.exec_writable;
  if (job.mem_gb || job.cpus) {
    p["limits"] = nlohmann::ordered_json::object();
    if (job.mem_gb) p["limits"]["mem_gb"] = *job.mem_gb;
    if (job.cpus) p["limits"]["cpus"] = *job.cpus;
  }
  return p;
}

Expected<ManifestPolicy> ManifestToPolicy(const Manifest& manifest, const std::vector<ApprovalRecord>& approvals,
                                          const ToolRegistry& registry, const JobDirs& job) {
  if (auto refused = CheckApproved(manifest, approvals)) return *refused;
  std::vector<ToolRequest> requested;
  if (job.role != Role::kCoordinator) requested = manifest.sandbox.tools;
  auto tools = ResolveTools(registry, requested, Platform::kLinux);
  if (!tools.ok()) return tools.error();
  auto json = BuildPolicyJson(manifest, tools.value(), job);
  if (!json.ok()) return json.error();
  ManifestPolicy out{json.value().dump(2), tools.value()};
  auto parsed = ParsePolicy(out.policy_json);
  if (!parsed.ok()) return Bad("policy." + parsed.error().where, parsed.error().what);
  return out;
}

}  // namespace oarbank
