// Tests for ParsePolicy: every fixture under fixtures/policies,
// the canonical paths and grants a valid policy yields, the size limit, and
// properties that arbitrary text and mutated policies never crash the parser
// and never produce an error that does not name its culprit.
//
// Fixtures write paths as @ROOT@, which stands for a fresh directory made per
// test (PolicyRoot below). An invalid fixture NAME.json has a sibling
// NAME.err holding the exact line PolicyErrorLine must print.
#include "sandbox/policy/policy.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <nlohmann/json.hpp>

#include "sandbox/common/path_within.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kFixtureDir = fs::path(OARBANK_SOURCE_DIR) / "fixtures" / "policies";
constexpr std::string_view kRootPlaceholder = "@ROOT@";
constexpr size_t kMiB = size_t{1} << 20;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// The tree every fixture's @ROOT@ stands for: bundle/, runtime/,
// runtime-file, tool/, work/, work/tmp/, data/, data/tmp/, a listening unix
// socket broker.sock and a symlink link-to-bundle -> bundle. The root itself
// is canonical, so a path the parser echoes back unresolved and one it
// resolved read the same in a .err file.
class PolicyRoot {
 public:
  PolicyRoot() {
    std::string pattern = (fs::temp_directory_path() / "oarbank-policy-test.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp: " + std::string(strerror(errno)));
    root_ = fs::canonical(pattern).string();
    for (const char* dir : {"bundle", "runtime", "tool", "work", "work/tmp", "data", "data/tmp"})
      fs::create_directory(fs::path(root_) / dir);
    WriteFile(fs::path(root_) / "runtime-file", "#!/bin/sh\n");
    fs::create_directory_symlink("bundle", fs::path(root_) / "link-to-bundle");

    const std::string socket_path = root_ + "/broker.sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof(addr.sun_path)) throw std::runtime_error("socket path too long: " + socket_path);
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    broker_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (broker_fd_ < 0 || bind(broker_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(broker_fd_, 1) != 0)
      throw std::runtime_error("broker socket: " + std::string(strerror(errno)));
  }
  ~PolicyRoot() {
    if (broker_fd_ >= 0) close(broker_fd_);
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  PolicyRoot(const PolicyRoot&) = delete;
  PolicyRoot& operator=(const PolicyRoot&) = delete;

  const std::string& path() const { return root_; }
  std::string operator/(std::string_view rel) const { return root_ + "/" + std::string(rel); }

  std::string Substitute(std::string text) const {
    for (size_t at = text.find(kRootPlaceholder); at != std::string::npos;
         at = text.find(kRootPlaceholder, at + root_.size()))
      text.replace(at, kRootPlaceholder.size(), root_);
    return text;
  }

 private:
  std::string root_;
  int broker_fd_ = -1;
};

// One root for the whole process, for the properties (rapidcheck runs each
// property a hundred times; the tree never changes, so it is shared).
const PolicyRoot& SharedRoot() {
  static const PolicyRoot root;
  return root;
}

std::vector<std::string> FixtureNames(const char* kind) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kFixtureDir / kind, ec))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string ParamName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

std::string FixtureText(const PolicyRoot& root, const char* kind, const std::string& name) {
  return root.Substitute(ReadFile(kFixtureDir / kind / (name + ".json")));
}

std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : std::string("(unresolvable)");
}

// --- the fixture directory itself ------------------------------------------

TEST(PolicyFixtures, EveryInvalidFixtureHasExactlyOneErrLine) {
  const auto valid = FixtureNames("valid");
  const auto invalid = FixtureNames("invalid");
  EXPECT_GE(valid.size(), 9u);
  EXPECT_GE(invalid.size(), 40u);
  std::set<std::string> json_names(invalid.begin(), invalid.end());
  for (const auto& name : invalid) EXPECT_TRUE(fs::exists(kFixtureDir / "invalid" / (name + ".err"))) << name;
  for (const auto& entry : fs::directory_iterator(kFixtureDir / "invalid")) {
    const std::string ext = entry.path().extension().string();
    EXPECT_TRUE(ext == ".json" || ext == ".err") << "stray file " << entry.path();
    if (ext == ".err") {
      EXPECT_TRUE(json_names.count(entry.path().stem().string())) << "orphan " << entry.path();
      const std::string err = ReadFile(entry.path());
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << entry.path() << " must be one line";
      EXPECT_EQ(err.rfind("policy: ", 0), 0u) << entry.path();
    }
  }
  for (const auto& entry : fs::directory_iterator(kFixtureDir / "valid"))
    EXPECT_EQ(entry.path().extension(), ".json") << "stray file " << entry.path();
}

// --- every fixture ---------------------------------------------------------

class ValidPolicyFixture : public ::testing::TestWithParam<std::string> {
 protected:
  PolicyRoot root_;
};

TEST_P(ValidPolicyFixture, ParsesToCanonicalGrants) {
  const auto policy = ParsePolicy(FixtureText(root_, "valid", GetParam()));
  ASSERT_TRUE(policy.ok()) << PolicyErrorLine(policy.error());
  const Policy& p = policy.value();
  EXPECT_EQ(p.contract(), 1);
  ASSERT_FALSE(p.grants().empty());
  EXPECT_EQ(p.grants().front().field, "bundle");
  EXPECT_EQ(p.grants().front().path, p.bundle());
  for (const auto& g : p.grants()) {
    EXPECT_EQ(Canonical(g.path), g.path) << g.field;
    EXPECT_TRUE(IsAtOrBelow(g.path, root_.path()) || IsAtOrBelow(g.path, "/usr")) << g.field << " " << g.path;
    EXPECT_EQ(g.path.find(kRootPlaceholder), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ValidPolicyFixture, ::testing::ValuesIn(FixtureNames("valid")), ParamName);

class InvalidPolicyFixture : public ::testing::TestWithParam<std::string> {
 protected:
  PolicyRoot root_;
};

TEST_P(InvalidPolicyFixture, GivesTheExactErrorLine) {
  std::string expected = root_.Substitute(ReadFile(kFixtureDir / "invalid" / (GetParam() + ".err")));
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(expected.back(), '\n');
  expected.pop_back();
  const auto policy = ParsePolicy(FixtureText(root_, "invalid", GetParam()));
  ASSERT_FALSE(policy.ok()) << "expected: " << expected;
  EXPECT_FALSE(policy.error().where.empty());
  EXPECT_EQ(PolicyErrorLine(policy.error()), expected);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InvalidPolicyFixture, ::testing::ValuesIn(FixtureNames("invalid")), ParamName);

// --- what a valid policy holds ---------------------------------------------

class PolicyTest : public ::testing::Test {
 protected:
  Expected<Policy> ParseValid(const std::string& name) { return ParsePolicy(FixtureText(root_, "valid", name)); }
  PolicyRoot root_;
};

TEST_F(PolicyTest, RunnerFullHoldsEveryField) {
  const auto parsed = ParseValid("runner-full");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  const Policy& p = parsed.value();
  EXPECT_EQ(p.role(), Role::kRunner);
  EXPECT_EQ(p.bundle(), root_ / "bundle");
  EXPECT_EQ(p.runtime(), root_ / "runtime");
  ASSERT_EQ(p.tools().size(), 2u);
  EXPECT_EQ(p.tools()[0].id, "jdk");
  EXPECT_TRUE(p.tools()[0].code_exec);
  EXPECT_EQ(p.tools()[0].paths, (std::vector<std::string>{root_ / "tool", root_ / "runtime-file"}));
  EXPECT_EQ(p.tools()[1].id, "usr-share");
  EXPECT_FALSE(p.tools()[1].code_exec);
  EXPECT_EQ(p.tools()[1].paths, (std::vector<std::string>{"/usr/share"}));
  EXPECT_EQ(p.work(), root_ / "work");
  EXPECT_EQ(p.data(), root_ / "data");
  EXPECT_EQ(p.tmp(), root_ / "work/tmp");
  EXPECT_EQ(p.net().mode, NetMode::kEgressAllowlist);
  EXPECT_EQ(p.net().allow, (std::vector<std::string>{"api.example.org", "*.files.example.org:8443"}));
  EXPECT_EQ(p.net().proxy_port, 3128);
  EXPECT_EQ(p.broker(), root_ / "broker.sock");
  EXPECT_EQ(p.gpu(), GpuMode::kNone);
  EXPECT_FALSE(p.exec_writable());
  EXPECT_EQ(p.limits().mem_gb, 2.0);
  EXPECT_EQ(p.limits().cpus, 1.5);
}

TEST_F(PolicyTest, GrantsListEveryDirectoryWithItsFieldAndAccess) {
  const auto parsed = ParseValid("runner-full");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  struct Expected {
    std::string field, path;
    bool is_dir;
    Access access;
  };
  const std::vector<Expected> expected = {
      {"bundle", root_ / "bundle", true, Access::kReadExecute},
      {"runtime", root_ / "runtime", true, Access::kReadExecute},
      {"tools[0].paths[0]", root_ / "tool", true, Access::kReadExecute},
      {"tools[0].paths[1]", root_ / "runtime-file", false, Access::kReadExecute},
      {"tools[1].paths[0]", "/usr/share", true, Access::kReadExecute},
      {"work", root_ / "work", true, Access::kReadWrite},
      {"data", root_ / "data", true, Access::kReadWrite},
      {"tmp", root_ / "work/tmp", true, Access::kReadWrite},
  };
  const auto& grants = parsed.value().grants();
  ASSERT_EQ(grants.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].field);
    EXPECT_EQ(grants[i].field, expected[i].field);
    EXPECT_EQ(grants[i].path, expected[i].path);
    EXPECT_EQ(grants[i].is_dir, expected[i].is_dir);
    EXPECT_EQ(grants[i].access, expected[i].access);
  }
  // The broker is a socket the planner handles on its own, not a path grant.
  for (const auto& g : grants) EXPECT_NE(g.path, root_ / "broker.sock");
}

TEST_F(PolicyTest, RunnerMinimalHasOnlyItsBundleAndDefaults) {
  const auto parsed = ParseValid("runner-minimal");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  const Policy& p = parsed.value();
  EXPECT_EQ(p.role(), Role::kRunner);
  ASSERT_EQ(p.grants().size(), 1u);
  EXPECT_EQ(p.grants()[0].access, Access::kReadExecute);
  EXPECT_FALSE(p.runtime() || p.work() || p.data() || p.tmp() || p.broker());
  EXPECT_TRUE(p.tools().empty());
  EXPECT_EQ(p.net().mode, NetMode::kNone);
  EXPECT_TRUE(p.net().allow.empty());
  EXPECT_EQ(p.net().proxy_port, 0);
  EXPECT_EQ(p.gpu(), GpuMode::kNone);
  EXPECT_FALSE(p.exec_writable());
  EXPECT_FALSE(p.limits().mem_gb || p.limits().cpus);
}

TEST_F(PolicyTest, CoordinatorMayHaveARuntimeFileAndDataWithTmp) {
  const auto parsed = ParseValid("coordinator");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  const Policy& p = parsed.value();
  EXPECT_EQ(p.role(), Role::kCoordinator);
  EXPECT_STREQ(RoleName(p.role()), "coordinator");
  EXPECT_EQ(p.runtime(), root_ / "runtime-file");
  EXPECT_EQ(p.data(), root_ / "data");
  EXPECT_EQ(p.tmp(), root_ / "data/tmp");
  EXPECT_FALSE(p.work());
  EXPECT_EQ(p.net().mode, NetMode::kNone);
  ASSERT_EQ(p.grants().size(), 4u);
  EXPECT_EQ(p.grants()[1].field, "runtime");
  EXPECT_FALSE(p.grants()[1].is_dir);
}

TEST_F(PolicyTest, ServiceAndProbeKeepTmpInsideData) {
  const auto service = ParseValid("service");
  ASSERT_TRUE(service.ok()) << PolicyErrorLine(service.error());
  EXPECT_EQ(service.value().role(), Role::kService);
  EXPECT_EQ(service.value().tmp(), root_ / "data/tmp");
  EXPECT_EQ(service.value().broker(), root_ / "broker.sock");
  ASSERT_EQ(service.value().tools().size(), 1u);
  EXPECT_EQ(service.value().limits().mem_gb, 0.5);

  const auto probe = ParseValid("probe");
  ASSERT_TRUE(probe.ok()) << PolicyErrorLine(probe.error());
  EXPECT_EQ(probe.value().role(), Role::kProbe);
  EXPECT_EQ(probe.value().tmp(), root_ / "data/tmp");
  EXPECT_EQ(probe.value().net().mode, NetMode::kEgressAny);
  EXPECT_STREQ(NetModeName(probe.value().net().mode), "egress-any");
  EXPECT_EQ(probe.value().gpu(), GpuMode::kNone);
}

TEST_F(PolicyTest, AllowlistIsLowercasedAndKeepsWildcardsAndPorts) {
  const auto parsed = ParseValid("egress-allowlist");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  EXPECT_EQ(parsed.value().net().mode, NetMode::kEgressAllowlist);
  EXPECT_EQ(parsed.value().net().allow, (std::vector<std::string>{"api.example.org", "*.cdn.example.net:8443",
                                                                  "a-b.example.com:1", "x1.example.io:65535"}));
  EXPECT_EQ(parsed.value().net().proxy_port, 65535);
}

TEST_F(PolicyTest, GpuCompute) {
  const auto parsed = ParseValid("gpu-compute");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  EXPECT_EQ(parsed.value().gpu(), GpuMode::kCompute);
}

TEST_F(PolicyTest, ExecWritableAllowsAWritableDirInsideAReadExecuteOne) {
  const auto parsed = ParseValid("exec-writable-nested");
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  EXPECT_TRUE(parsed.value().exec_writable());
  EXPECT_EQ(parsed.value().runtime(), root_.path());
  EXPECT_EQ(parsed.value().work(), root_ / "work");

  // Control: the same policy without exec_writable is refused, naming work.
  auto doc = json::parse(FixtureText(root_, "valid", "exec-writable-nested"));
  doc["exec_writable"] = false;
  const auto refused = ParsePolicy(doc.dump());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().where, "work");
}

// A grant path is resolved without following a link anyone but root could
// have planted (common/grant_path.h): the error names the path and the link.
TEST_F(PolicyTest, ALinkOutsideTheSystemsOwnDirectoriesIsRefusedNamingIt) {
  ASSERT_TRUE(fs::is_symlink(root_ / "link-to-bundle"));
  const json doc = {{"contract", 1}, {"role", "runner"}, {"bundle", root_ / "link-to-bundle/../bundle"}};
  const auto parsed = ParsePolicy(doc.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().where, "bundle");
  EXPECT_EQ(parsed.error().what.rfind(root_ / "link-to-bundle" + " is a symbolic link (to bundle), refused: ", 0), 0u)
      << parsed.error().what;
}

// A link a job planted in its writable grant, named as a later job's tool,
// is refused whatever it points at.
TEST_F(PolicyTest, ALinkPlantedInsideAWritableGrantIsRefused) {
  fs::create_directory_symlink(root_ / "tool", root_ / "work/tool-link");
  const json doc = {{"contract", 1},
                    {"role", "runner"},
                    {"bundle", root_ / "bundle"},
                    {"tools", {{{"id", "t"}, {"paths", {root_ / "work/tool-link/sub/.."}}}}}};
  const auto parsed = ParsePolicy(doc.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().where, "tools[0].paths[0]");
  EXPECT_NE(parsed.error().what.find(root_ / "work/tool-link" + " is a symbolic link (to " + (root_ / "tool") + ")"),
            std::string::npos)
      << parsed.error().what;
}

// The system's own links are followed (Debian's /lib64 -> usr/lib64), and the
// grant is the canonical path with the inode it led to.
TEST_F(PolicyTest, TheSystemsOwnLinksAreFollowed) {
  if (!fs::is_symlink("/lib64")) GTEST_SKIP() << "/lib64 is not a link on this host (no merged /usr)";
  const json doc = {{"contract", 1},
                    {"role", "runner"},
                    {"bundle", root_ / "bundle"},
                    {"tools", {{{"id", "t"}, {"paths", {"/lib64"}}}}}};
  const auto parsed = ParsePolicy(doc.dump());
  ASSERT_TRUE(parsed.ok()) << PolicyErrorLine(parsed.error());
  EXPECT_EQ(parsed.value().tools()[0].paths, std::vector<std::string>{fs::canonical("/lib64").string()});
  struct stat st {};
  ASSERT_EQ(stat("/lib64", &st), 0);
  EXPECT_EQ(parsed.value().grants()[1].inode, (FileId{st.st_dev, st.st_ino}));
}

// Never a link at or below a path the policy itself grants, even a system
// one: a job given that path could have planted it.
TEST_F(PolicyTest, NoLinkInsideAGrantIsFollowedEvenInTheSystemsDirectories) {
  std::string link;
  for (const char* name : {"python3", "sh", "awk"})
    if (fs::is_symlink(std::string("/usr/bin/") + name)) link = std::string("/usr/bin/") + name;
  if (link.empty()) GTEST_SKIP() << "no link among /usr/bin/{python3,sh,awk} on this host";
  const json doc = {{"contract", 1},
                    {"role", "runner"},
                    {"bundle", root_ / "bundle"},
                    {"tools", {{{"id", "t"}, {"paths", {"/usr/bin", link}}}}}};
  const auto parsed = ParsePolicy(doc.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().where, "tools[0].paths[1]");
  EXPECT_NE(parsed.error().what.find(link + " is a symbolic link inside tools[0].paths[0] (/usr/bin)"),
            std::string::npos)
      << parsed.error().what;
}

// Nesting is judged on canonical paths, not on what the policy spelled.
TEST_F(PolicyTest, NestingIsJudgedOnTheCanonicalPath) {
  const json doc = {
      {"contract", 1}, {"role", "runner"}, {"bundle", root_ / "data/../work/./tmp"}, {"work", root_ / "work"}};
  const auto parsed = ParsePolicy(doc.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(PolicyErrorLine(parsed.error()), "policy: bundle: " + (root_ / "work/tmp") +
                                                 " (bundle) lies inside the writable grant work (" + (root_ / "work") +
                                                 ") and would become writable");
}

// --- size and shape limits -------------------------------------------------

TEST_F(PolicyTest, AcceptsExactlyOneMiBAndRefusesOneByteMore) {
  const std::string text = FixtureText(root_, "valid", "runner-minimal");
  ASSERT_LT(text.size(), kMiB);
  const std::string at_limit = text + std::string(kMiB - text.size(), ' ');
  ASSERT_EQ(at_limit.size(), kMiB);
  EXPECT_TRUE(ParsePolicy(at_limit).ok());

  const auto over = ParsePolicy(at_limit + " ");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(PolicyErrorLine(over.error()), "policy: (policy): larger than 1 MiB");
}

TEST_F(PolicyTest, RefusesATwoMiBPolicy) {
  std::string text = FixtureText(root_, "valid", "runner-full");
  ASSERT_TRUE(ParsePolicy(text).ok());
  text += std::string(2 * kMiB - text.size(), ' ');
  ASSERT_EQ(text.size(), 2 * kMiB);
  const auto parsed = ParsePolicy(text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().where, "(policy)");
  EXPECT_EQ(parsed.error().what, "larger than 1 MiB");
}

TEST(PolicyShape, DeepNestingIsAnErrorNotAStackOverflow) {
  const std::string unclosed(kMiB, '[');
  const auto a = ParsePolicy(unclosed);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(PolicyErrorLine(a.error()), "policy: (policy): expected a JSON object: the text is not valid JSON");

  const std::string arrays = std::string(kMiB / 2, '[') + std::string(kMiB / 2, ']');
  const auto b = ParsePolicy(arrays);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(PolicyErrorLine(b.error()), "policy: (policy): expected a JSON object, got array");

  std::string objects;
  const size_t depth = (kMiB - 1) / 6;
  for (size_t i = 0; i < depth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(depth, '}');
  ASSERT_LE(objects.size(), kMiB);
  const auto c = ParsePolicy(objects);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().where, "a");
}

TEST_F(PolicyTest, LoadPolicyFileReadsAFileAndNamesAMissingOne) {
  const std::string file = root_ / "policy.json";
  WriteFile(file, FixtureText(root_, "valid", "service"));
  const auto loaded = LoadPolicyFile(file);
  ASSERT_TRUE(loaded.ok()) << PolicyErrorLine(loaded.error());
  EXPECT_EQ(loaded.value().role(), Role::kService);

  const auto missing = LoadPolicyFile(root_ / "no-such-policy.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().where, root_ / "no-such-policy.json");
  EXPECT_EQ(missing.error().what, "cannot read the policy file: No such file or directory");
  const auto directory = LoadPolicyFile(root_ / "");
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().what, "cannot read the policy file: not a regular file (a directory)");
}

TEST_F(PolicyTest, LoadPolicyFileRefusesAnOversizedFile) {
  const std::string file = root_ / "big.json";
  WriteFile(file, FixtureText(root_, "valid", "runner-minimal") + std::string(2 * kMiB, ' '));
  const auto loaded = LoadPolicyFile(file);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(PolicyErrorLine(loaded.error()), "policy: (policy): larger than 1 MiB");
}

// --- properties ------------------------------------------------------------

// If a policy parses, the invariants ParsePolicy promises hold; if it does
// not, the error names a culprit.
void CheckOutcome(const Expected<Policy>& parsed) {
  if (!parsed.ok()) {
    RC_ASSERT(!parsed.error().where.empty());
    RC_ASSERT(!parsed.error().what.empty());
    return;
  }
  const Policy& p = parsed.value();
  RC_ASSERT(p.contract() == 1);
  RC_ASSERT(!p.grants().empty());
  RC_ASSERT(p.grants()[0].path == p.bundle());
  for (const auto& g : p.grants()) {
    RC_ASSERT(!g.path.empty());
    RC_ASSERT(Canonical(g.path) == g.path);
  }
  if (p.work()) RC_ASSERT(p.role() == Role::kRunner);
  if (!p.tools().empty()) RC_ASSERT(p.role() != Role::kCoordinator);
  if (p.tmp()) {
    const auto& home = p.role() == Role::kRunner ? p.work() : p.data();
    RC_ASSERT(home.has_value());
    RC_ASSERT(IsStrictlyBelow(*p.tmp(), *home));
  }
  if (p.net().mode == NetMode::kEgressAllowlist) {
    RC_ASSERT(!p.net().allow.empty());
    RC_ASSERT(p.net().proxy_port >= 1 && p.net().proxy_port <= 65535);
  } else {
    RC_ASSERT(p.net().allow.empty());
    RC_ASSERT(p.net().proxy_port == 0);
  }
  for (const auto& entry : p.net().allow) RC_ASSERT(entry.find_first_of("[]/@ ") == std::string::npos);
  for (const auto& w : p.grants()) {
    if (w.access != Access::kReadWrite) continue;
    for (const auto& r : p.grants()) {
      if (r.access != Access::kReadExecute) continue;
      RC_ASSERT(!IsAtOrBelow(r.path, w.path));
      if (!p.exec_writable()) RC_ASSERT(!IsAtOrBelow(w.path, r.path));
    }
    for (const char* base : {"/usr", "/etc", "/proc"}) {
      RC_ASSERT(!IsAtOrBelow(base, w.path));
      if (!p.exec_writable()) RC_ASSERT(!IsAtOrBelow(w.path, base));
    }
  }
}

RC_GTEST_PROP(PolicyProperty, ArbitraryTextNeverCrashesAndNamesTheCulprit, (const std::string& text)) {
  CheckOutcome(ParsePolicy(text));
}

// Text built from JSON tokens and policy words, so that most inputs get past
// the JSON parser and into the field checks.
RC_GTEST_PROP(PolicyProperty, JsonTokenSoupNeverCrashesAndNamesTheCulprit, ()) {
  const auto& root = SharedRoot();
  static const std::vector<std::string> tokens = {"{",
                                                  "}",
                                                  "[",
                                                  "]",
                                                  ",",
                                                  ":",
                                                  "\"\"",
                                                  "1",
                                                  "0",
                                                  "-1",
                                                  "1e400",
                                                  "1.5",
                                                  "true",
                                                  "null",
                                                  "\"contract\"",
                                                  "\"role\"",
                                                  "\"runner\"",
                                                  "\"service\"",
                                                  "\"bundle\"",
                                                  "\"work\"",
                                                  "\"tmp\"",
                                                  "\"net\"",
                                                  "\"mode\"",
                                                  "\"allow\"",
                                                  "\"proxy_port\"",
                                                  "\"egress-allowlist\"",
                                                  "\"tools\"",
                                                  "\"id\"",
                                                  "\"paths\"",
                                                  "\"limits\"",
                                                  "\"mem_gb\"",
                                                  "\"devices\"",
                                                  "\"gpu\"",
                                                  "\"broker\"",
                                                  "\"\\u0000\"",
                                                  "\"\\ud800\"",
                                                  "\"/\"",
                                                  "\"" + (root / "bundle") + "\"",
                                                  "\"" + (root / "work") + "\"",
                                                  "\"" + (root / "work/tmp") + "\""};
  const auto picks = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(0, tokens.size()));
  std::string text;
  for (size_t i : picks) text += tokens[i];
  CheckOutcome(ParsePolicy(text));
}

json InterestingString(const PolicyRoot& root) {
  return *rc::gen::elementOf(std::vector<std::string>{root / "bundle",
                                                      root / "runtime",
                                                      root / "runtime-file",
                                                      root / "tool",
                                                      root / "work",
                                                      root / "work/tmp",
                                                      root / "data",
                                                      root / "data/tmp",
                                                      root / "broker.sock",
                                                      root / "link-to-bundle",
                                                      root / "missing",
                                                      root.path(),
                                                      root / "*",
                                                      "/",
                                                      "/usr",
                                                      "/usr/share",
                                                      "/proc",
                                                      "/dev",
                                                      "relative",
                                                      "",
                                                      "runner",
                                                      "service",
                                                      "coordinator",
                                                      "probe",
                                                      "none",
                                                      "egress-allowlist",
                                                      "egress-any",
                                                      "compute",
                                                      "code-exec",
                                                      "api.example.org",
                                                      "*.example.org:8443",
                                                      "a.*.b",
                                                      "10.0.0.1",
                                                      "::1",
                                                      "host:0",
                                                      "host:65536",
                                                      std::string("\0x", 2)});
}

std::string InterestingKey() {
  return *rc::gen::oneOf(rc::gen::elementOf(std::vector<std::string>{
                             "contract", "role",   "bundle",  "runtime",       "tools",  "work", "data",  "tmp",
                             "net",      "broker", "devices", "exec_writable", "limits", "mode", "allow", "proxy_port",
                             "id",       "paths",  "trust",   "gpu",           "mem_gb", "cpus", ""}),
                         rc::gen::arbitrary<std::string>());
}

json ArbitraryValue(const PolicyRoot& root, int depth) {
  switch (*rc::gen::inRange(0, depth > 0 ? 10 : 8)) {
    case 0: return nullptr;
    case 1: return *rc::gen::arbitrary<bool>();
    case 2: return *rc::gen::arbitrary<long long>();
    case 3: return *rc::gen::elementOf(std::vector<long long>{0, 1, 2, -1, 65535, 65536, LLONG_MIN, LLONG_MAX});
    case 4: return std::numeric_limits<unsigned long long>::max();
    case 5: return *rc::gen::arbitrary<double>();
    case 6: return *rc::gen::arbitrary<std::string>();
    case 7: return InterestingString(root);
    case 8: {
      json a = json::array();
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) a.push_back(ArbitraryValue(root, depth - 1));
      return a;
    }
    default: {
      json o = json::object();
      const int n = *rc::gen::inRange(0, 4);
      for (int i = 0; i < n; ++i) o[InterestingKey()] = ArbitraryValue(root, depth - 1);
      return o;
    }
  }
}

// Every location in the document, as JSON pointers (the root is "").
void CollectPointers(const json& value, const json::json_pointer& at, std::vector<json::json_pointer>& out) {
  out.push_back(at);
  if (value.is_object())
    for (const auto& [key, child] : value.items()) CollectPointers(child, at / key, out);
  else if (value.is_array())
    for (size_t i = 0; i < value.size(); ++i) CollectPointers(value[i], at / i, out);
}

void MutateOnce(json& doc, const PolicyRoot& root) {
  std::vector<json::json_pointer> pointers;
  CollectPointers(doc, json::json_pointer(), pointers);
  const auto at = *rc::gen::elementOf(pointers);
  json& target = doc[at];
  switch (*rc::gen::inRange(0, 4)) {
    case 0:  // replace a value
      target = ArbitraryValue(root, 2);
      break;
    case 1:  // remove a value
      if (at.empty()) break;
      if (json& parent = doc[at.parent_pointer()]; parent.is_object())
        parent.erase(at.back());
      else
        parent.erase(std::stoul(at.back()));
      break;
    case 2:  // add a field or an element
      if (target.is_object())
        target[InterestingKey()] = ArbitraryValue(root, 1);
      else if (target.is_array())
        target.push_back(ArbitraryValue(root, 1));
      break;
    default:  // swap in another policy string
      if (target.is_string()) target = InterestingString(root);
      break;
  }
}

void MutateText(std::string& text) {
  if (text.empty()) return;
  const size_t at = *rc::gen::inRange<size_t>(0, text.size());
  switch (*rc::gen::inRange(0, 5)) {
    case 0: text.erase(at, 1); break;
    case 1: text.insert(at, 1, *rc::gen::arbitrary<char>()); break;
    case 2: text[at] = *rc::gen::elementOf(std::string("{}[],:\"\\0 -.e*/")); break;
    case 3: text.resize(at); break;
    default:  // a duplicate of a real key, right after the first brace
      if (const auto brace = text.find('{'); brace != std::string::npos)
        text.insert(brace + 1, "\"" + InterestingKey() + "\": 1,");
      break;
  }
}

RC_GTEST_PROP(PolicyProperty, MutatedValidPolicyNeverCrashesAndNamesTheCulprit, ()) {
  const auto& root = SharedRoot();
  static const std::vector<std::string> valid = FixtureNames("valid");
  RC_PRE(!valid.empty());
  const std::string name = *rc::gen::elementOf(valid);
  json doc = json::parse(FixtureText(root, "valid", name));
  const int steps = *rc::gen::inRange(1, 7);
  for (int i = 0; i < steps; ++i) MutateOnce(doc, root);
  std::string text = doc.dump(*rc::gen::element(-1, 2), ' ', false, json::error_handler_t::replace);
  const int text_edits = *rc::gen::inRange(0, 3);
  for (int i = 0; i < text_edits; ++i) MutateText(text);
  const auto parsed = ParsePolicy(text);
  RC_CLASSIFY(parsed.ok(), "still parses");
  CheckOutcome(parsed);
}

}  // namespace
}  // namespace oarbank
