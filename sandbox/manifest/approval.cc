#include "sandbox/manifest/approval.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sandbox/common/json_formats.h"
#include "sandbox/common/parse_error.h"
#include "sandbox/common/sha256.h"
#include "sandbox/common/trust_file.h"

namespace oarbank {
namespace {

using nlohmann::json;  // std::map underneath: keys come out sorted

const char* GpuName(GpuMode gpu) {
  switch (gpu) {
    case GpuMode::kNone: return "none";
    case GpuMode::kCompute: return "compute";
  }
  return "?";
}

json RecordJson(const ApprovalRecord& r) {
  return {{"module", r.module}, {"version", r.version}, {"digest", r.digest}, {"who", r.who}, {"when", r.when}};
}

}  // namespace

std::string CanonicalRequests(const Manifest& m) {
  const SandboxRequests& s = m.sandbox;
  std::vector<std::string> allow = s.allow;
  std::sort(allow.begin(), allow.end());
  std::vector<ToolRequest> tools = s.tools;
  std::sort(tools.begin(), tools.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::vector<ContainerRequest> containers = s.containers;
  std::sort(containers.begin(), containers.end(),
            [](const auto& a, const auto& b) { return std::tie(a.image, a.platform) < std::tie(b.image, b.platform); });
  json j;
  j["module"] = {{"name", m.name}, {"version", m.version}};
  j["contract"] = 1;
  j["net"] = {{"mode", NetModeName(s.net)}, {"allow", allow}};
  j["tools"] = json::array();
  for (const auto& t : tools) j["tools"].push_back({{"id", t.id}, {"trust", t.code_exec ? "code-exec" : "none"}});
  j["devices"] = {{"gpu", GpuName(s.gpu)}};
  j["containers"] = json::array();
  for (const auto& c : containers) j["containers"].push_back({{"image", c.image}, {"platform", c.platform}});
  j["exec_writable"] = s.exec_writable;
  return j.dump(-1, ' ', /*ensure_ascii=*/true);
}

std::string RequestsDigest(const Manifest& manifest) { return "sha256:" + Sha256Hex(CanonicalRequests(manifest)); }

std::vector<std::string> ApprovalFlags(const Manifest& m) {
  std::vector<std::string> flags;
  for (const auto& t : m.sandbox.tools)
    if (t.code_exec) flags.push_back("tools: " + t.id + " runs arbitrary code (trust = \"code-exec\")");
  switch (m.sandbox.net) {
    case NetMode::kNone: break;
    case NetMode::kEgressAllowlist:
      flags.push_back("net: egress to " + std::to_string(m.sandbox.allow.size()) +
                      " host(s) through the agent's proxy");
      break;
    case NetMode::kEgressAny: flags.push_back("net: egress-any is a full-trust grant (any public address)"); break;
  }
  if (m.sandbox.gpu == GpuMode::kCompute) flags.push_back("devices.gpu: compute widens the kernel surface");
  if (!m.sandbox.containers.empty())
    flags.push_back("containers: the job's broker endpoint for " + std::to_string(m.sandbox.containers.size()) +
                    " pinned image(s)");
  if (m.sandbox.exec_writable) flags.push_back("exec_writable: the runner may execute files it wrote");
  return flags;
}

namespace {

Expected<std::vector<ApprovalRecord>> ParseApprovals(const std::string& path, const std::string& text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("approvals") || !doc["approvals"].is_array())
    return Bad(path, "expected {\"approvals\": [...]}");
  std::vector<ApprovalRecord> out;
  for (size_t i = 0; i < doc["approvals"].size(); ++i) {
    const json& r = doc["approvals"][i];
    const std::string at = "approvals[" + std::to_string(i) + "]";
    if (!r.is_object()) return Bad(at, "expected an object");
    ApprovalRecord rec;
    for (auto [key, field] : {std::pair{"module", &rec.module},
                              {"version", &rec.version},
                              {"digest", &rec.digest},
                              {"who", &rec.who},
                              {"when", &rec.when}}) {
      if (!r.contains(key) || !r[key].is_string() || r[key].get<std::string>().empty())
        return Bad(at + "." + key, "expected a non-empty string");
      *field = r[key].get<std::string>();
    }
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace

Expected<std::vector<ApprovalRecord>> LoadApprovals(const std::string& path) {
  // A trust file: whoever writes it decides what runs (trust_file.h).
  auto text = ReadTrustedFile(path);
  if (!text.ok()) return Bad(path, text.error().what);
  if (!text.value()) return std::vector<ApprovalRecord>{};
  return ParseApprovals(path, *text.value());
}

Expected<ApprovalRecord> MakeApproval(const Manifest& manifest, const std::string& who, const std::string& when) {
  if (manifest.RequestsNothing())
    return Bad("approval", manifest.name + " " + manifest.version + " requests nothing: it needs no approval");
  if (who.empty() || std::any_of(who.begin(), who.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return Bad("approval.who", "expected the approving operator's name");
  return ApprovalRecord{manifest.name, manifest.version, RequestsDigest(manifest), who, when};
}

std::optional<Error> AppendApproval(const std::string& path, const ApprovalRecord& record) {
  // Read, append and replace under one lock, so concurrent approvals all land.
  auto lock = TrustLock::Acquire(path);
  if (!lock.ok()) return lock.error();
  auto existing = LoadApprovals(path);
  if (!existing.ok()) return existing.error();
  json doc = {{"format", kApprovalsFormat}, {"approvals", json::array()}};
  for (const auto& r : existing.value()) doc["approvals"].push_back(RecordJson(r));
  doc["approvals"].push_back(RecordJson(record));
  return WriteTrustedFile(path, doc.dump(2) + "\n", 0644);
}

std::optional<Error> CheckApproved(const Manifest& m, const std::vector<ApprovalRecord>& approvals) {
  if (m.RequestsNothing()) return std::nullopt;
  const std::string digest = RequestsDigest(m);
  std::vector<std::string> other_versions;
  const ApprovalRecord* same_version = nullptr;
  for (const auto& r : approvals) {
    if (r.module != m.name) continue;
    if (r.version != m.version) {
      other_versions.push_back(r.version);
      continue;
    }
    if (r.digest == digest) return std::nullopt;
    same_version = &r;
  }
  const std::string who = m.name + " " + m.version;
  if (same_version != nullptr)
    return Bad("approval", who + ": the approved requests (" + same_version->digest + ", by " + same_version->who +
                               ") differ from the manifest's (" + digest + "): approve the new requests");
  if (!other_versions.empty())
    return Bad("approval", who + " is not approved (only version " + other_versions.back() +
                               " is): a new version needs its own approval of " + digest);
  return Bad("approval", who + " requests grants that no operator has approved (" + digest + ")");
}

std::string UtcNow() {
  const time_t now = time(nullptr);
  struct tm tm {};
  gmtime_r(&now, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace oarbank
