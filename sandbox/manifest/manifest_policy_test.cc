// The approval flow (approval.h), the tool registry (tool_registry.h), the
// manifest -> Policy step (manifest_policy.h) round-tripped through
// ParsePolicy, and the portability lint (portability.h) on injected hosts.
#include "sandbox/manifest/manifest_policy.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sandbox/manifest/approval.h"
#include "sandbox/manifest/portability.h"
#include "sandbox/manifest/tool_registry.h"
#include "sandbox/testing/test_util.h"

namespace oarbank {
namespace {

using testing::FakeHost;
using testing::TempTree;

const std::string kHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Manifest Parse(const std::string& sandbox, const std::string& version = "1.0.0", const std::string& platforms = "") {
  auto m = ParseManifest("[module]\nname = \"demo\"\nversion = \"" + version + "\"\n" + platforms + "\n" +
                         (sandbox.empty() ? "" : "[sandbox]\ncontract = 1\n" + sandbox));
  if (!m.ok()) ADD_FAILURE() << ManifestErrorLine(m.error());
  return m.ok() ? m.value() : Manifest{};
}

const char* kRequests =
    "net = { mode = \"egress-allowlist\", allow = [\"api.example.org\"] }\n"
    "tools = [{ id = \"faketool\", trust = \"code-exec\" }]\n";

// ---- approval --------------------------------------------------------------

TEST(Approval, AManifestRequestingNothingNeedsNone) {
  const Manifest m = Parse("");
  EXPECT_FALSE(CheckApproved(m, {}).has_value());
  auto record = MakeApproval(m, "alice", "2026-11-29T12:00:00Z");
  ASSERT_FALSE(record.ok());
  EXPECT_EQ(record.error().what, "demo 1.0.0 requests nothing: it needs no approval");
}

TEST(Approval, UnapprovedRequestsAreRefusedThenApprovedExactly) {
  const Manifest m = Parse(kRequests);
  auto refused = CheckApproved(m, {});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->where, "approval");
  EXPECT_EQ(refused->what, "demo 1.0.0 requests grants that no operator has approved (" + RequestsDigest(m) + ")");
  auto record = MakeApproval(m, "alice", "2026-11-29T12:00:00Z");
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record.value().digest, RequestsDigest(m));
  EXPECT_FALSE(CheckApproved(m, {record.value()}).has_value());
}

TEST(Approval, ChangedRequestsOfTheSameVersionNeedANewApproval) {
  const Manifest approved = Parse(kRequests);
  const Manifest widened = Parse(std::string(kRequests) + "exec_writable = true\n");
  const auto record = MakeApproval(approved, "alice", "t").value();
  auto refused = CheckApproved(widened, {record});
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->what.find("differ from the manifest's (" + RequestsDigest(widened) + ")"), std::string::npos)
      << refused->what;
}

TEST(Approval, ANewVersionNeedsItsOwnApprovalEvenWithTheSameRequests) {
  const Manifest v1 = Parse(kRequests, "1.0.0");
  const Manifest v2 = Parse(kRequests, "1.1.0");
  const auto record = MakeApproval(v1, "alice", "t").value();
  EXPECT_FALSE(CheckApproved(v1, {record}).has_value());
  auto refused = CheckApproved(v2, {record});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->what,
            "demo 1.1.0 is not approved (only version 1.0.0 is): a new version needs its own approval of " +
                RequestsDigest(v2));
  // Another module's approval of the same digest approves nothing here.
  ApprovalRecord other = record;
  other.module = "other";
  EXPECT_TRUE(CheckApproved(v1, {other}).has_value());
}

TEST(Approval, TheStoreIsAnAppendOnlyJsonTrail) {
  TempTree tree;
  const std::string store = tree.Path("approvals.json");
  auto empty = LoadApprovals(store);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty.value().empty());
  const Manifest v1 = Parse(kRequests, "1.0.0");
  const Manifest v2 = Parse(kRequests, "2.0.0");
  ASSERT_FALSE(AppendApproval(store, MakeApproval(v1, "alice", "2026-11-29T12:00:00Z").value()).has_value());
  ASSERT_FALSE(AppendApproval(store, MakeApproval(v2, "bob", "2026-11-29T13:00:00Z").value()).has_value());
  auto loaded = LoadApprovals(store);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded.value().size(), 2u);
  EXPECT_EQ(loaded.value()[0].who, "alice");
  EXPECT_EQ(loaded.value()[1].version, "2.0.0");
  EXPECT_EQ(loaded.value()[1].when, "2026-11-29T13:00:00Z");
  EXPECT_FALSE(CheckApproved(v2, loaded.value()).has_value());
  const auto j = nlohmann::json::parse(std::ifstream(store));
  EXPECT_EQ(j["approvals"][0]["digest"], RequestsDigest(v1));
  EXPECT_EQ(j["format"], "oarbank.approvals/1");

  // Members the reader does not know (a later version's) are ignored, at
  // the top and in a record; a store written before `format` reads the same.
  tree.Write("later.json",
             R"({"format": "oarbank.approvals/1", "signed": {"by": "x"}, "approvals": [{"module": "demo",)"
             R"( "version": "1", "digest": "sha256:0", "who": "alice", "when": "t", "ticket": 42}]})",
             0644);
  auto later = LoadApprovals(tree.Path("later.json"));
  ASSERT_TRUE(later.ok()) << later.error().what;
  ASSERT_EQ(later.value().size(), 1u);
  EXPECT_EQ(later.value()[0].who, "alice");
  tree.Write("before.json",
             R"({"approvals": [{"module": "demo", "version": "1", "digest": "sha256:0", "who": "bob",)"
             R"( "when": "t"}]})",
             0644);
  auto before = LoadApprovals(tree.Path("before.json"));
  ASSERT_TRUE(before.ok()) << before.error().what;
  EXPECT_EQ(before.value()[0].who, "bob");

  tree.Write("bad.json", R"({"approvals": [{"module": "demo", "version": "1", "digest": "x", "who": ""}]})", 0644);
  auto bad = LoadApprovals(tree.Path("bad.json"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "approvals[0].who");
}

TEST(Approval, FlagsNameWhatAnOperatorMustWeigh) {
  const auto flags = ApprovalFlags(Parse(std::string(kRequests) + "devices = { gpu = \"compute\" }\n"));
  ASSERT_EQ(flags.size(), 3u);
  EXPECT_EQ(flags[0], "tools: faketool runs arbitrary code (trust = \"code-exec\")");
  EXPECT_EQ(flags[2], "devices.gpu: compute widens the kernel surface");
  EXPECT_TRUE(ApprovalFlags(Parse("")).empty());
}

// ---- tool registry -----------------------------------------------------------

struct RegistryTree {
  TempTree tree;
  std::string registry_text;
  RegistryTree() {
    std::filesystem::create_directories(tree.Path("tools/faketool/bin"));
    tree.Write("tools/faketool/bin/run", "#!/bin/sh\n", 0755);
    std::filesystem::create_directory_symlink(tree.Path("tools/faketool"), tree.Path("tools/link-to-faketool"));
    registry_text = "[tools.faketool]\nlinux = [\"" + tree.Path("tools/link-to-faketool") +
                    "\"]\nwindows = ['C:\\Tools\\fake']\n\n[tools.gone]\nlinux = [\"" + tree.Path("tools/gone") +
                    "\"]\n";
  }
};

TEST(ToolRegistry, IdsResolveToCanonicalPaths) {
  RegistryTree t;
  auto reg = ParseToolRegistry(t.registry_text, "tools.toml");
  ASSERT_TRUE(reg.ok()) << reg.error().where << ": " << reg.error().what;
  auto tools = ResolveTools(reg.value(), {{"faketool", true}});
  ASSERT_TRUE(tools.ok()) << tools.error().what;
  ASSERT_EQ(tools.value().size(), 1u);
  EXPECT_EQ(tools.value()[0].paths, std::vector<std::string>{t.tree.Path("tools/faketool")});
  EXPECT_TRUE(tools.value()[0].code_exec);
  auto windows = ResolveTools(reg.value(), {{"faketool", false}}, Platform::kWindows);
  ASSERT_TRUE(windows.ok());
  EXPECT_EQ(windows.value()[0].paths, std::vector<std::string>{"C:\\Tools\\fake"});
}

TEST(ToolRegistry, AnUnknownIdIsAnErrorNamingIt) {
  RegistryTree t;
  auto reg = ParseToolRegistry(t.registry_text, "tools.toml").value();
  auto tools = ResolveTools(reg, {{"faketool", false}, {"java18", false}});
  ASSERT_FALSE(tools.ok());
  EXPECT_EQ(tools.error().where, "sandbox.tools[1].id");
  EXPECT_EQ(tools.error().what, "no tool \"java18\" in the operator's tool registry (tools.toml)");
  auto macos = ResolveTools(reg, {{"faketool", false}}, Platform::kMacos);
  ASSERT_FALSE(macos.ok());
  EXPECT_EQ(macos.error().what, "tool \"faketool\" has no macos paths in the tool registry (tools.toml)");
  auto gone = ResolveTools(reg, {{"gone", false}});
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().what,
            "tool \"gone\": " + t.tree.Path("tools/gone") + " (tools.gone.linux[0]) does not exist on this node");
}

TEST(ToolRegistry, MalformedEntriesAreNamed) {
  struct Case {
    const char* text;
    const char* where;
    const char* what;
  };
  for (const auto& c : {
           Case{"[tools.a]\nlinux = [\"relative/path\"]\n", "tools.a.linux[0]",
                "expected an absolute path, got \"relative/path\""},
           Case{"[tools.a]\nlinux = [\"/usr/lib/*\"]\n", "tools.a.linux[0]",
                "globs are not allowed: a tool is whole directories or single files"},
           Case{"[tools.a]\nbsd = [\"/usr\"]\n", "tools.a.bsd", "unknown key (known: linux, macos, windows)"},
           Case{"[tools.a]\nlinux = []\n", "tools.a.linux", "expected a non-empty array of paths"},
           Case{"[tools.A]\nlinux = [\"/usr\"]\n", "tools.A",
                "expected a tool id: lower-case letters, digits, '.', '_' and '-', at most 64"},
           Case{"[tools.a]\nwindows = [\"/usr\"]\n", "tools.a.windows[0]",
                "expected an absolute Windows path (X:\\...), got \"/usr\""},
           Case{"paths = 1\n", "paths", "unknown key (known: tools)"},
           Case{"[tools.a]\nlinux = [\"/opt/caf\xc3\xa9\"]\n", "(registry)",
                "line 2, column 19: a non-ASCII byte: a tool registry is ASCII text"},
       }) {
    auto reg = ParseToolRegistry(c.text);
    ASSERT_FALSE(reg.ok()) << c.text;
    EXPECT_EQ(reg.error().where, c.where) << c.text;
    EXPECT_EQ(reg.error().what, c.what) << c.text;
  }
}

TEST(ToolRegistry, TheToolsFileListsCanonicalPathsById) {
  TempTree tree;
  ASSERT_FALSE(WriteToolsFile(tree.Path("tools.json"), {{"java17", {"/usr/lib/jvm/x"}, true}}).has_value());
  const auto j = nlohmann::json::parse(std::ifstream(tree.Path("tools.json")));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"format": "oarbank.tools/1", "tools": {"java17": ["/usr/lib/jvm/x"]}})"));
}

// ---- manifest -> Policy ------------------------------------------------------

struct Job {
  RegistryTree reg;
  JobDirs dirs;
  Job() {
    const TempTree& t = reg.tree;
    dirs.role = Role::kRunner;
    dirs.bundle = t.Path("bundle");
    dirs.work = t.Path("work");
    dirs.data = t.Path("data");
    dirs.tmp = t.Path("work/tmp");
    dirs.proxy_port = 3128;
  }
  ToolRegistry Registry() const { return ParseToolRegistry(reg.registry_text, "tools.toml").value(); }
};

TEST(ManifestPolicy, AnApprovedManifestBecomesAPolicyTheParserAccepts) {
  Job job;
  const Manifest m = Parse(kRequests);
  const auto approval = MakeApproval(m, "alice", "t").value();
  auto out = ManifestToPolicy(m, {approval}, job.Registry(), job.dirs);
  ASSERT_TRUE(out.ok()) << out.error().where << ": " << out.error().what;
  auto policy = ParsePolicy(out.value().policy_json);
  ASSERT_TRUE(policy.ok()) << PolicyErrorLine(policy.error());
  const Policy& p = policy.value();
  EXPECT_EQ(p.role(), Role::kRunner);
  EXPECT_EQ(p.bundle(), job.reg.tree.Path("bundle"));
  EXPECT_EQ(p.net().mode, NetMode::kEgressAllowlist);
  EXPECT_EQ(p.net().allow, std::vector<std::string>{"api.example.org:443"});
  EXPECT_EQ(p.net().proxy_port, 3128);
  ASSERT_EQ(p.tools().size(), 1u);
  EXPECT_EQ(p.tools()[0].id, "faketool");
  EXPECT_EQ(p.tools()[0].paths, std::vector<std::string>{job.reg.tree.Path("tools/faketool")});
  EXPECT_TRUE(p.tools()[0].code_exec);
  EXPECT_FALSE(p.exec_writable());
  EXPECT_EQ(out.value().tools.size(), 1u);
}

TEST(ManifestPolicy, AnUnapprovedManifestNeverBecomesAPolicy) {
  Job job;
  const Manifest m = Parse(kRequests);
  auto out = ManifestToPolicy(m, {}, job.Registry(), job.dirs);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().where, "approval");
  // Approval is checked before anything else: even a job that could not
  // run is refused for approval first.
  JobDirs broken = job.dirs;
  broken.bundle = "/nonexistent";
  EXPECT_EQ(ManifestToPolicy(m, {}, job.Registry(), broken).error().where, "approval");
  // A manifest requesting nothing needs no approval.
  auto none = ManifestToPolicy(Parse(""), {}, job.Registry(), job.dirs);
  ASSERT_TRUE(none.ok()) << none.error().what;
  EXPECT_EQ(ParsePolicy(none.value().policy_json).value().net().mode, NetMode::kNone);
}

TEST(ManifestPolicy, RolesGetOnlyWhatTheContractGivesThem) {
  Job job;
  const Manifest m = Parse(std::string(kRequests) + "exec_writable = true\n");
  const auto approval = MakeApproval(m, "alice", "t").value();
  JobDirs coordinator = job.dirs;
  coordinator.role = Role::kCoordinator;
  coordinator.work.reset();
  coordinator.tmp = job.reg.tree.Path("data/tmp");
  auto c = ManifestToPolicy(m, {approval}, job.Registry(), coordinator);
  ASSERT_TRUE(c.ok()) << c.error().where << ": " << c.error().what;
  const Policy pc = ParsePolicy(c.value().policy_json).value();
  EXPECT_TRUE(pc.tools().empty());
  EXPECT_FALSE(pc.exec_writable());
  EXPECT_EQ(pc.net().mode, NetMode::kEgressAllowlist);

  JobDirs service = coordinator;
  service.role = Role::kService;
  const Policy ps = ParsePolicy(ManifestToPolicy(m, {approval}, job.Registry(), service).value().policy_json).value();
  EXPECT_EQ(ps.tools().size(), 1u);
  EXPECT_FALSE(ps.exec_writable());

  const Policy pr = ParsePolicy(ManifestToPolicy(m, {approval}, job.Registry(), job.dirs).value().policy_json).value();
  EXPECT_TRUE(pr.exec_writable());
}

TEST(ManifestPolicy, JobFieldsARequestNeedsAreNamed) {
  Job job;
  const Manifest m = Parse(std::string(kRequests) + "containers = [{ image = \"a/b@sha256:" + kHex +
                           "\", platform = \"linux/amd64\" }]\n");
  const auto approval = MakeApproval(m, "alice", "t").value();
  JobDirs no_proxy = job.dirs;
  no_proxy.proxy_port = 0;
  EXPECT_EQ(ManifestToPolicy(m, {approval}, job.Registry(), no_proxy).error().where, "job.proxy_port");
  EXPECT_EQ(ManifestToPolicy(m, {approval}, job.Registry(), job.dirs).error().where, "job.broker");
  JobDirs no_work = job.dirs;
  no_work.work.reset();
  no_work.broker = job.reg.tree.MakeSocket("broker.sock");
  EXPECT_EQ(ManifestToPolicy(m, {approval}, job.Registry(), no_work).error().where, "job.work");
  // A directory the Policy refuses is the Policy's own error.
  JobDirs bad_tmp = job.dirs;
  bad_tmp.broker = no_work.broker;
  bad_tmp.tmp = job.reg.tree.Path("data/tmp");
  auto refused = ManifestToPolicy(m, {approval}, job.Registry(), bad_tmp);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().where, "policy.tmp");
  // An unknown tool id names the manifest key.
  const Manifest unknown = Parse("tools = [{ id = \"java18\" }]\n");
  auto u = ManifestToPolicy(unknown, {MakeApproval(unknown, "alice", "t").value()}, job.Registry(), job.dirs);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().where, "sandbox.tools[0].id");
  EXPECT_EQ(u.error().what, "no tool \"java18\" in the operator's tool registry (tools.toml)");
}

// ---- portability ---------------------------------------------------------------

const GrantLint* Row(const PlatformLint& p, const std::string& grant) {
  for (const auto& g : p.grants)
    if (g.grant == grant) return &g;
  return nullptr;
}

TEST(Portability, LinuxFollowsTheCapabilityTableOfTheHost) {
  const Manifest m = Parse("net = { mode = \"egress-any\" }\ncontainers = [{ image = \"a/b@sha256:" + kHex +
                               "\", platform = \"linux/amd64\" }]\n",
                           "1.0.0", "platforms = [\"linux\"]");
  auto lint = LintPortability(m, FakeHost(7));
  ASSERT_EQ(lint.size(), 1u);
  EXPECT_EQ(lint[0].verdict, Verdict::kCapabilityNotEnforced);
  ASSERT_NE(Row(lint[0], "net.mode = \"egress-any\""), nullptr);
  EXPECT_EQ(Row(lint[0], "net.mode = \"egress-any\"")->status, Status::kUnavailable);
  // Below ABI 9 the broker is an inherited connection (seccomp keeps
  // socket(AF_UNIX) refused); without seccomp it is not enforced.
  EXPECT_EQ(Row(lint[0], "containers: a/b@sha256:" + kHex + " (linux/amd64)")->status, Status::kEnforced);
  HostFacts no_seccomp = FakeHost(7);
  no_seccomp.seccomp_filter = false;
  EXPECT_NE(Row(LintPortability(m, no_seccomp)[0], "containers: a/b@sha256:" + kHex + " (linux/amd64)")->status,
            Status::kEnforced);
  EXPECT_EQ(Row(lint[0], "exec_writable = false")->status, Status::kEnforced);
  EXPECT_EQ(Row(lint[0], "always-on rules")->status, Status::kEnforced);
  // At ABI 9 the broker is enforced by path; egress-any never is on Linux.
  auto abi9 = LintPortability(m, FakeHost(9));
  EXPECT_EQ(Row(abi9[0], "containers: a/b@sha256:" + kHex + " (linux/amd64)")->status, Status::kEnforced);
  EXPECT_EQ(abi9[0].verdict, Verdict::kCapabilityNotEnforced);
  // No Landlock at all: the backend is missing.
  EXPECT_EQ(LintPortability(Parse(""), FakeHost(0))[0].verdict, Verdict::kBackendMissing);
  EXPECT_EQ(LintPortability(Parse(""), FakeHost(6))[0].verdict, Verdict::kOk);
  EXPECT_EQ(LintPortability(Parse(""), FakeHost(5))[0].verdict, Verdict::kCapabilityNotEnforced);
}

TEST(Portability, WindowsCannotEnforceExecWritableFalse) {
  const Manifest m = Parse("tools = [{ id = \"java17\" }]\n", "1.0.0", "platforms = [\"windows\", \"macos\"]");
  auto lint = LintPortability(m, FakeHost(7));
  ASSERT_EQ(lint.size(), 2u);
  EXPECT_EQ(lint[0].platform, Platform::kWindows);
  EXPECT_EQ(lint[0].verdict, Verdict::kCapabilityNotEnforced);
  EXPECT_EQ(Row(lint[0], "exec_writable = false")->status, Status::kUnavailable);
  EXPECT_EQ(lint[1].verdict, Verdict::kOk);
  // exec_writable = true asks nothing of Windows that it cannot do.
  const Manifest w = Parse("exec_writable = true\n", "1.0.0", "platforms = [\"windows\"]");
  EXPECT_EQ(LintPortability(w, FakeHost(7))[0].verdict, Verdict::kOk);
  const auto j = PortabilityJson(lint);
  EXPECT_EQ(j[0]["platform"], "windows");
  EXPECT_EQ(j[0]["placement"], "CAPABILITY_NOT_ENFORCED");
}

}  // namespace
}  // namespace oarbank
