// Tests for ParseManifest (manifest.h) and the approval digest (approval.h):
// every fixture under fixtures/manifests (an invalid NAME.toml has a
// sibling NAME.err with the exact line ManifestErrorLine prints), and
// properties: the canonical form is stable when the same requests are
// written in another order, style or case, and the digest changes when any
// one request changes.
#include "sandbox/manifest/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <nlohmann/json.hpp>

#include "sandbox/manifest/approval.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtureDir = fs::path(OARBANK_SOURCE_DIR) / "fixtures" / "manifests";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> FixtureNames(const char* kind) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kFixtureDir / kind))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ManifestFixtures, EveryValidFixtureParses) {
  const auto names = FixtureNames("valid");
  ASSERT_GE(names.size(), 8u);
  for (const auto& name : names) {
    auto m = ParseManifest(ReadFile(kFixtureDir / "valid" / (name + ".toml")));
    EXPECT_TRUE(m.ok()) << name << ": " << (m.ok() ? "" : ManifestErrorLine(m.error()));
  }
}

TEST(ManifestFixtures, EveryInvalidFixtureGivesItsExactLine) {
  const auto names = FixtureNames("invalid");
  ASSERT_GE(names.size(), 70u);
  for (const auto& name : names) {
    const fs::path err = kFixtureDir / "invalid" / (name + ".err");
    ASSERT_TRUE(fs::exists(err)) << name << " has no .err file";
    std::string expected = ReadFile(err);
    if (!expected.empty() && expected.back() == '\n') expected.pop_back();
    auto m = ParseManifest(ReadFile(kFixtureDir / "invalid" / (name + ".toml")));
    ASSERT_FALSE(m.ok()) << name << " was accepted";
    EXPECT_EQ(ManifestErrorLine(m.error()), expected) << name;
    EXPECT_EQ(expected.find('\n'), std::string::npos) << name << ": one line";
  }
}

TEST(ManifestFixtures, FullManifestHoldsEveryRequestNormalized) {
  auto m = ParseManifest(ReadFile(kFixtureDir / "valid" / "full.toml"));
  ASSERT_TRUE(m.ok());
  const Manifest& v = m.value();
  EXPECT_EQ(v.name, "example-runner");
  EXPECT_EQ(v.version, "1.4.0");
  EXPECT_EQ(v.platforms, (std::vector<Platform>{Platform::kLinux, Platform::kMacos, Platform::kWindows}));
  EXPECT_EQ(v.sandbox.net, NetMode::kEgressAllowlist);
  EXPECT_EQ(v.sandbox.allow, (std::vector<std::string>{"api.example.org:443", "*.files.example.org:8443"}));
  ASSERT_EQ(v.sandbox.tools.size(), 1u);
  EXPECT_EQ(v.sandbox.tools[0].id, "java17");
  EXPECT_TRUE(v.sandbox.tools[0].code_exec);
  EXPECT_EQ(v.sandbox.gpu, GpuMode::kCompute);
  ASSERT_EQ(v.sandbox.containers.size(), 1u);
  EXPECT_EQ(v.sandbox.containers[0].platform, "linux/amd64");
  EXPECT_FALSE(v.sandbox.exec_writable);
  EXPECT_FALSE(v.RequestsNothing());
}

TEST(ManifestFixtures, TwoSpellingsOfOneManifestHaveOneDigest) {
  auto a = ParseManifest(ReadFile(kFixtureDir / "valid" / "full.toml"));
  auto b = ParseManifest(ReadFile(kFixtureDir / "valid" / "full-standard-tables.toml"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(CanonicalRequests(a.value()), CanonicalRequests(b.value()));
  EXPECT_EQ(RequestsDigest(a.value()), RequestsDigest(b.value()));
  EXPECT_EQ(RequestsDigest(a.value()).substr(0, 7), "sha256:");
  EXPECT_EQ(RequestsDigest(a.value()).size(), 7u + 64u);
}

TEST(ManifestFixtures, DefaultsSpelledOutRequestNothing) {
  for (const char* name : {"no-sandbox", "empty-sandbox-defaults"}) {
    auto m = ParseManifest(ReadFile(kFixtureDir / "valid" / (std::string(name) + ".toml")));
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_TRUE(m.value().RequestsNothing()) << name;
    EXPECT_EQ(m.value().platforms, std::vector<Platform>{Platform::kLinux}) << name;
  }
  auto a = ParseManifest(ReadFile(kFixtureDir / "valid" / "no-sandbox.toml"));
  auto b = ParseManifest(ReadFile(kFixtureDir / "valid" / "empty-sandbox-defaults.toml"));
  EXPECT_EQ(RequestsDigest(a.value()), RequestsDigest(b.value()));
  for (const char* name : {"egress-any", "exec-writable", "tool-without-trust", "container-variant"}) {
    auto m = ParseManifest(ReadFile(kFixtureDir / "valid" / (std::string(name) + ".toml")));
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_FALSE(m.value().RequestsNothing()) << name;
  }
}

TEST(ManifestParse, OversizedTextIsRefusedByName) {
  auto m = ParseManifest(std::string((1 << 20) + 1, '#'));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ManifestErrorLine(m.error()), "manifest: (manifest): larger than 1 MiB");
}

TEST(ManifestParse, MissingFileNamesIt) {
  auto m = LoadManifestFile("/nonexistent/oarbank-manifest.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ManifestErrorLine(m.error()),
            "manifest: /nonexistent/oarbank-manifest.toml: cannot read the manifest file: No such file or directory");
}

// ---- properties ------------------------------------------------------------

struct Requests {
  std::string version;
  int net = 0;                                      // 0 none, 1 allowlist, 2 any
  std::vector<std::pair<std::string, int>> allow;   // host, port (0: default)
  std::vector<std::pair<std::string, bool>> tools;  // id, code-exec
  bool gpu = false;
  std::vector<std::pair<std::string, std::string>> containers;  // hex digest, arch
  bool exec_writable = false;
};

rc::Gen<std::string> Label() {
  return rc::gen::exec([] {
    const int n = *rc::gen::inRange(1, 8);
    std::string s;
    for (int i = 0; i < n; ++i) s += *rc::gen::elementOf(std::string("abcxyz"));
    return s;
  });
}

rc::Gen<Requests> GenRequests() {
  return rc::gen::exec([] {
    Requests r;
    r.version = "1." + std::to_string(*rc::gen::inRange(0, 50));
    r.net = *rc::gen::inRange(0, 3);
    if (r.net == 1) {
      std::set<std::string> seen;
      const int n = *rc::gen::inRange(1, 5);
      for (int i = 0; i < n; ++i) {
        std::string host = (*rc::gen::arbitrary<bool>() ? "*." : "") + *Label() + "." + *Label() + ".org";
        const int port = *rc::gen::element(0, 443, 8443, 1, 65535);
        const std::string key = host + ":" + std::to_string(port == 0 ? 443 : port);
        if (seen.insert(key).second) r.allow.push_back({host, port});
      }
    }
    std::set<std::string> ids;
    const int tools = *rc::gen::inRange(0, 4);
    for (int i = 0; i < tools; ++i) {
      const std::string id = *Label() + std::to_string(i);
      if (ids.insert(id).second) r.tools.push_back({id, *rc::gen::arbitrary<bool>()});
    }
    r.gpu = *rc::gen::arbitrary<bool>();
    const int containers = *rc::gen::inRange(0, 3);
    for (int i = 0; i < containers; ++i) {
      std::string hex;
      for (int j = 0; j < 64; ++j) hex += "0123456789abcdef"[*rc::gen::inRange(0, 16)];
      r.containers.push_back({hex, *rc::gen::element(std::string("amd64"), std::string("arm64"))});
    }
    r.exec_writable = *rc::gen::arbitrary<bool>();
    return r;
  });
}

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

// The same requests as TOML. `variant` picks inline tables or standard
// ones, the order of keys and list entries, the case of host names, and
// whether defaults are written out.
std::string Render(const Requests& r, unsigned variant) {
  auto pick = [&](int bit) { return ((variant >> bit) & 1u) != 0; };
  auto rotate = [&](auto list, int by) {
    if (!list.empty()) std::rotate(list.begin(), list.begin() + (by % list.size()), list.end());
    return list;
  };
  std::string t = "[module]\nname = \"m\"\nversion = \"" + r.version + "\"\n\n[sandbox]\ncontract = 1\n";
  const char* modes[] = {"none", "egress-allowlist", "egress-any"};
  std::string allow;
  for (const auto& [host, port] : rotate(r.allow, variant >> 5)) {
    const std::string h = pick(2) ? Upper(host) : host;
    const int p = port == 0 && pick(3) ? 443 : port;
    allow += (allow.empty() ? "" : ", ") + ("\"" + h + (p == 0 ? "" : ":" + std::to_string(p))) + "\"";
  }
  const bool write_net = r.net != 0 || pick(4);
  std::string scalars;
  if (r.exec_writable || pick(4))
    scalars += std::string("exec_writable = ") + (r.exec_writable ? "true" : "false") + "\n";
  if (pick(0)) {  // inline tables
    if (write_net)
      t += std::string("net = { ") + (r.net == 1 ? "allow = [" + allow + "], " : "") + "mode = \"" + modes[r.net] +
           "\" }\n";
    t += scalars;
    if (r.gpu || pick(4)) t += std::string("devices = { gpu = \"") + (r.gpu ? "compute" : "none") + "\" }\n";
    std::string tools;
    for (const auto& [id, exec] : rotate(r.tools, variant >> 7))
      tools += (tools.empty() ? "" : ", ") + std::string("{ id = \"") + id + "\"" +
               (exec ? ", trust = \"code-exec\"" : "") + " }";
    if (!r.tools.empty() || pick(4)) t += "tools = [" + tools + "]\n";
    std::string cs;
    for (const auto& [hex, arch] : rotate(r.containers, variant >> 9))
      cs += (cs.empty() ? "" : ", ") + std::string("{ platform = \"linux/") + arch +
            "\", image = \"reg.example.org/a/b@sha256:" + hex + "\" }";
    if (!r.containers.empty() || pick(4)) t += "containers = [" + cs + "]\n";
  } else {  // standard tables, in another order
    t += scalars;
    if (r.gpu || pick(4)) t += std::string("\n[sandbox.devices]\ngpu = \"") + (r.gpu ? "compute" : "none") + "\"\n";
    if (write_net)
      t += std::string("\n[sandbox.net]\nmode = \"") + modes[r.net] + "\"\n" +
           (r.net == 1 ? "allow = [" + allow + "]\n" : "");
    for (const auto& [hex, arch] : rotate(r.containers, variant >> 9))
      t += "\n[[sandbox.containers]]\nimage = \"reg.example.org/a/b@sha256:" + hex + "\"\nplatform = \"linux/" + arch +
           "\"\n";
    for (const auto& [id, exec] : rotate(r.tools, variant >> 7))
      t += std::string("\n[[sandbox.tools]]\n") + (exec ? "trust = \"code-exec\"\n" : "") + "id = \"" + id + "\"\n";
  }
  if (pick(1)) t = "# comment\n\n" + t + "\n# trailing comment\n";
  return t;
}

Manifest MustParse(const std::string& text) {
  auto m = ParseManifest(text);
  if (!m.ok()) RC_FAIL(ManifestErrorLine(m.error()) + "\n" + text);
  return m.value();
}

RC_GTEST_PROP(ManifestProperties, CanonicalFormIsStableUnderReorderingAndFormatting, ()) {
  const Requests r = *GenRequests();
  const unsigned a = *rc::gen::arbitrary<unsigned>();
  const unsigned b = *rc::gen::arbitrary<unsigned>();
  const Manifest ma = MustParse(Render(r, a));
  const Manifest mb = MustParse(Render(r, b));
  RC_ASSERT(CanonicalRequests(ma) == CanonicalRequests(mb));
  RC_ASSERT(RequestsDigest(ma) == RequestsDigest(mb));
  // The canonical form is itself JSON whose keys are sorted and which
  // re-serializes to the same text.
  RC_ASSERT(nlohmann::json::parse(CanonicalRequests(ma)).dump() == CanonicalRequests(ma));
}

RC_GTEST_PROP(ManifestProperties, DigestChangesWhenAnyRequestChanges, ()) {
  const Requests r = *GenRequests();
  Requests changed = r;
  const int what = *rc::gen::inRange(0, 10);
  switch (what) {
    case 0: changed.version += ".1"; break;
    case 1:
      changed.net = (r.net + 1 + *rc::gen::inRange(0, 2)) % 3;
      if (changed.net == 1)
        changed.allow = {{"new.example.org", 0}};
      else
        changed.allow.clear();
      break;
    case 2:
      if (r.net != 1) {
        changed.net = 1;
        changed.allow = {{"a.example.org", 0}};
      } else
        changed.allow.push_back({"added.example.org", 8443});
      break;
    case 3:
      if (r.net == 1 && !r.allow.empty())
        changed.allow[0].second = r.allow[0].second == 444 ? 445 : 444;
      else {
        changed.net = 1;
        changed.allow = {{"b.example.org", 444}};
      }
      break;
    case 4:
      if (!r.tools.empty())
        changed.tools[0].second = !r.tools[0].second;
      else
        changed.tools = {{"jq", false}};
      break;
    case 5:
      if (!r.tools.empty())
        changed.tools.pop_back();
      else
        changed.tools = {{"python3", true}};
      break;
    case 6: changed.gpu = !r.gpu; break;
    case 7: changed.exec_writable = !r.exec_writable; break;
    case 8:
      if (!r.containers.empty())
        changed.containers[0].first[0] = r.containers[0].first[0] == 'a' ? 'b' : 'a';
      else
        changed.containers = {{std::string(64, 'c'), "amd64"}};
      break;
    case 9:
      if (!r.containers.empty())
        changed.containers[0].second = r.containers[0].second == "amd64" ? "arm64" : "amd64";
      else
        changed.containers = {{std::string(64, 'd'), "arm64"}};
      break;
  }
  RC_TAG(what);
  const Manifest before = MustParse(Render(r, *rc::gen::arbitrary<unsigned>()));
  const Manifest after = MustParse(Render(changed, *rc::gen::arbitrary<unsigned>()));
  RC_ASSERT(CanonicalRequests(before) != CanonicalRequests(after));
  RC_ASSERT(RequestsDigest(before) != RequestsDigest(after));
}

RC_GTEST_PROP(ManifestProperties, ArbitraryTextIsAManifestOrANamedError, (const std::string& text)) {
  auto m = ParseManifest(text);
  if (!m.ok()) {
    RC_ASSERT(!m.error().where.empty());
    RC_ASSERT(!m.error().what.empty());
    RC_ASSERT(ManifestErrorLine(m.error()).find('\n') == std::string::npos);
  }
}

RC_GTEST_PROP(ManifestProperties, MutatedFixturesNeverCrash, ()) {
  const auto names = FixtureNames("valid");
  std::string text = ReadFile(kFixtureDir / "valid" / (*rc::gen::elementOf(names) + ".toml"));
  const int edits = *rc::gen::inRange(1, 6);
  for (int i = 0; i < edits && !text.empty(); ++i) {
    const size_t at = *rc::gen::inRange<size_t>(0, text.size());
    switch (*rc::gen::inRange(0, 3)) {
      case 0: text.erase(at, 1); break;
      case 1: text.insert(at, 1, *rc::gen::elementOf(std::string("\"[]{}=,.*:@/\\\n#0"))); break;
      case 2: text[at] = *rc::gen::arbitrary<char>(); break;
    }
  }
  auto m = ParseManifest(text);
  if (!m.ok()) RC_ASSERT(!m.error().where.empty());
}

}  // namespace
}  // namespace oarbank
