#include "sandbox/manifest/portability.h"

namespace oarbank {
namespace {

struct GrantNeed {
  std::string grant;
  std::vector<CapabilityId> capabilities;
};

// The manifest's grants, each with the capabilities that enforce it (the
// same ones RequiredCapabilities asks of the Policy a runner would get).
std::vector<GrantNeed> GrantsOf(const Manifest& m) {
  const SandboxRequests& s = m.sandbox;
  std::vector<GrantNeed> out;
  switch (s.net) {
    case NetMode::kNone: out.push_back({"net.mode = \"none\"", {CapabilityId::kNetNone}}); break;
    case NetMode::kEgressAllowlist:
      out.push_back({"net.mode = \"egress-allowlist\"",
                     {CapabilityId::kNetEgressAllowlist, CapabilityId::kNetNoLoopback, CapabilityId::kNetNoLinkLocal}});
      break;
    case NetMode::kEgressAny: out.push_back({"net.mode = \"egress-any\"", {CapabilityId::kNetEgressAny}}); break;
  }
  for (const auto& t : s.tools) out.push_back({"tools: " + t.id, {CapabilityId::kFilesystem}});
  if (s.gpu == GpuMode::kCompute) out.push_back({"devices.gpu = \"compute\"", {CapabilityId::kGpu}});
  for (const auto& c : s.containers)
    out.push_back({"containers: " + c.image + " (" + c.platform + ")", {CapabilityId::kIpcBrokerOnly}});
  if (s.exec_writable)
    out.push_back({"exec_writable = true", {CapabilityId::kFilesystem}});
  else
    out.push_back({"exec_writable = false", {CapabilityId::kExecWritableDeny}});
  out.push_back({"always-on rules", AlwaysOnCapabilities()});
  return out;
}

// What the contract promises of the macOS and Windows backends, with its
// stated exceptions. No probe of those systems runs here.
CapabilityStatus ContractStatus(Platform platform, CapabilityId id) {
  const std::string backend = platform == Platform::kMacos ? "Seatbelt" : "AppContainer + Job Object";
  if (platform == Platform::kWindows && id == CapabilityId::kExecWritableDeny)
    return {id, Status::kUnavailable,
            "contract: Windows cannot enforce exec_writable = false without application control"};
  if (id == CapabilityId::kHideExistence)
    return {id, Status::kUnavailable, "contract: hiding which files exist is not promised"};
  std::string detail = "contract: " + backend + " enforces it (not probed from this host)";
  if (platform == Platform::kWindows && id == CapabilityId::kFilesystem)
    detail += "; on Windows any readable binary is executable";
  return {id, Status::kEnforced, detail};
}

Status Weakest(Status a, Status b) {
  auto rank = [](Status s) {
    switch (s) {
      case Status::kEnforced: return 0;
      case Status::kCooperative: return 1;
      case Status::kUnavailable: return 2;
    }
    return 2;
  };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace

std::vector<PlatformLint> LintPortability(const Manifest& manifest, const HostFacts& host) {
  std::vector<PlatformLint> out;
  const auto grants = GrantsOf(manifest);
  for (Platform platform : manifest.platforms) {
    PlatformLint lint{platform, "", Verdict::kOk, {}};
    std::vector<CapabilityId> need;
    for (const auto& g : grants) {
      GrantLint row{g.grant, Status::kEnforced, {}};
      for (auto id : g.capabilities) {
        CapabilityStatus s;
        switch (platform) {
          case Platform::kLinux: s = Assess(id, host); break;
          case Platform::kMacos:
          case Platform::kWindows: s = ContractStatus(platform, id); break;
        }
        row.status = Weakest(row.status, s.status);
        row.capabilities.push_back(std::move(s));
        need.push_back(id);
      }
      lint.grants.push_back(std::move(row));
    }
    switch (platform) {
      case Platform::kLinux:
        lint.backend = "Landlock + seccomp (this host: Linux " + host.kernel_release + ", Landlock ABI " +
                       std::to_string(host.landlock_abi) + ")";
        lint.verdict = PlaceCapabilities(need, host).verdict;
        break;
      case Platform::kMacos:
      case Platform::kWindows:
        lint.backend = platform == Platform::kMacos ? "Seatbelt (the contract's promise)"
                                                    : "AppContainer + Job Object (the contract's promise)";
        for (const auto& row : lint.grants)
          if (row.status != Status::kEnforced) lint.verdict = Verdict::kCapabilityNotEnforced;
        break;
    }
    out.push_back(std::move(lint));
  }
  return out;
}

nlohmann::ordered_json PortabilityJson(const std::vector<PlatformLint>& lint) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& p : lint) {
    nlohmann::ordered_json grants = nlohmann::ordered_json::array();
    for (const auto& g : p.grants) {
      nlohmann::ordered_json caps = nlohmann::ordered_json::array();
      for (const auto& c : g.capabilities)
        caps.push_back({{"capability", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
      grants.push_back({{"grant", g.grant}, {"status", StatusName(g.status)}, {"capabilities", caps}});
    }
    out.push_back({{"platform", PlatformName(p.platform)},
                   {"backend", p.backend},
                   {"placement", VerdictName(p.verdict)},
                   {"grants", grants}});
  }
  return out;
}

std::string PortabilityText(const std::vector<PlatformLint>& lint) {
  std::string out;
  for (const auto& p : lint) {
    out += std::string(PlatformName(p.platform)) + ": " + VerdictName(p.verdict) + " (" + p.backend + ")\n";
    for (const auto& g : p.grants) {
      out += "  " + std::string(StatusName(g.status)) + "  " + g.grant + "\n";
      if (g.status != Status::kEnforced)
        for (const auto& c : g.capabilities)
          if (c.status != Status::kEnforced)
            out += std::string("      ") + CapabilityName(c.id) + ": " + c.detail + "\n";
    }
  }
  return out;
}

}  // namespace oarbank
