// Tests for the broker's request parser (sandbox/broker/protocol.h): every refusal
// next to the accepted request it differs from by one field, mounts that
// try to leave the work directory by '..', an absolute path or a symlink,
// and malformed or oversized lines.
#include "sandbox/broker/protocol.h"
#include "sandbox/common/fault_hooks.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "sandbox/testing/test_util.h"

namespace oarbank::broker {
namespace {

using nlohmann::json;

const std::string kRef = "localhost/tool@sha256:" + std::string(64, 'a');
const std::string kForeignRef = "localhost/arm-tool@sha256:" + std::string(64, 'b');

class BrokerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(tree_.Path("work/out/deeper"));
    std::filesystem::create_directories(tree_.Path("data/cache"));
    tree_.Write("work/input.txt", "x", 0644);
    std::filesystem::create_symlink("/etc", tree_.Path("work/etc-link"));
    std::filesystem::create_symlink("out", tree_.Path("work/inner-link"));
    std::filesystem::create_symlink(tree_.Path("outside"), tree_.Path("data/escape"));
    mkfifo(tree_.Path("work/fifo").c_str(), 0644);
    config_.work_dir = tree_.Path("work");
    config_.data_dir = tree_.Path("data");
    config_.images = {{kRef, "linux/amd64"}, {kForeignRef, "linux/arm64"}};
    config_.cpus = 2;
    config_.mem_gb = 1.5;
    config_.max_timeout_s = 600;
    config_.host_platform = "linux/amd64";
  }

  json Run(json extra = json::object()) const {
    json r = {
        {"op", "container.run"}, {"image", kRef}, {"platform", "linux/amd64"}, {"args", {"true"}}, {"timeout_s", 10}};
    for (auto& [k, v] : extra.items()) r[k] = v;
    return r;
  }
  json Mounts(const std::string& src, const std::string& dst = "/mnt") const {
    return {{"mounts", json::array({{{"src", src}, {"dst", dst}}})}};
  }

  Parsed Parse(const json& request) const { return ParseRequest(request.dump(), config_); }

  // The refusal a request gets; fails the test if it was accepted.
  Refused Refusal(const json& request) const {
    Parsed p = Parse(request);
    if (auto* r = std::get_if<Refused>(&p)) return *r;
    ADD_FAILURE() << "accepted: " << request.dump();
    return {Refusal::kBadRequest, "(accepted)"};
  }
  RunRequest Accepted(const json& request) const {
    Parsed p = Parse(request);
    if (auto* r = std::get_if<Refused>(&p)) {
      ADD_FAILURE() << "refused " << RefusalName(r->error) << ": " << r->detail << " for " << request.dump();
      return {};
    }
    return std::get<RunRequest>(std::get<Request>(p));
  }

  testing::TempTree tree_;
  BrokerConfig config_;
};

TEST_F(BrokerProtocol, AcceptsAnApprovedRunWithItsReservation) {
  const RunRequest run = Accepted(Run());
  EXPECT_EQ(run.image, kRef);
  EXPECT_EQ(run.args, std::vector<std::string>{"true"});
  EXPECT_DOUBLE_EQ(run.cpus, 2);
  EXPECT_DOUBLE_EQ(run.mem_gb, 1.5);
  EXPECT_FALSE(run.network);
}

TEST_F(BrokerProtocol, ImageNotApproved) {
  for (const std::string& image :
       std::vector<std::string>{"localhost/tool:latest", "localhost/tool@sha256:" + std::string(64, 'c'),
                                "docker.io/library/busybox", kRef + " ", ""}) {
    const Refused r = Refusal(Run({{"image", image}}));
    EXPECT_EQ(r.error, Refusal::kImageNotApproved) << image << ": " << r.detail;
  }
}

TEST_F(BrokerProtocol, PlatformUnavailable) {
  EXPECT_EQ(Refusal(Run({{"platform", "linux/arm64"}})).error, Refusal::kPlatformUnavailable);
  // Approved for arm64, but this host runs amd64 and nothing emulates.
  const Refused r = Refusal(Run({{"image", kForeignRef}, {"platform", "linux/arm64"}}));
  EXPECT_EQ(r.error, Refusal::kPlatformUnavailable);
  EXPECT_NE(r.detail.find("does not run on this host"), std::string::npos) << r.detail;
  EXPECT_EQ(Refusal(Run({{"platform", nullptr}})).error, Refusal::kBadRequest);
}

TEST_F(BrokerProtocol, MountsInsideWorkAndDataAreResolvedCanonically) {
  const RunRequest run = Accepted(Run({{"mounts", json::array({{{"src", "out/deeper"}, {"dst", "/w"}, {"ro", true}},
                                                               {{"src", "data:cache"}, {"dst", "/cache"}},
                                                               {{"src", "input.txt"}, {"dst", "/in.txt"}},
                                                               {{"src", "."}, {"dst", "/work"}}})}}));
  ASSERT_EQ(run.mounts.size(), 4u);
  EXPECT_EQ(run.mounts[0].source, tree_.Path("work/out/deeper"));
  EXPECT_TRUE(run.mounts[0].read_only);
  EXPECT_EQ(run.mounts[1].source, tree_.Path("data/cache"));
  EXPECT_FALSE(run.mounts[1].read_only);
  EXPECT_EQ(run.mounts[2].source, tree_.Path("work/input.txt"));
  EXPECT_EQ(run.mounts[3].source, tree_.Path("work"));
}

TEST_F(BrokerProtocol, BadMountSources) {
  for (const std::string& src : std::vector<std::string>{
           "..", "../outside", "out/../../outside", "out/..", tree_.Path("work/out"), "/etc", "etc-link",
           "etc-link/passwd", "inner-link", "data:escape", "data:escape/secret", "data:../outside", "fifo", "missing",
           "out//deeper", "out/./deeper", "a:b", "out,ro", "out\\deeper"}) {
    const Refused r = Refusal(Run(Mounts(src)));
    EXPECT_EQ(r.error, Refusal::kBadMount) << src << ": " << r.detail;
  }
}

TEST_F(BrokerProtocol, SymlinkEscapeIsNamed) {
  const Refused r = Refusal(Run(Mounts("etc-link")));
  EXPECT_NE(r.detail.find("symlink"), std::string::npos) << r.detail;
}

// The same sources where the kernel has no openat2 (Linux < 5.6): the
// walk that stands for it refuses the same ones and accepts the same ones.
TEST_F(BrokerProtocol, MountSourcesAreJudgedAlikeWithoutOpenat2) {
  fault_hooks.skip_step = [](const char* step) { return strcmp(step, "openat2") == 0; };
  for (const std::string& src :
       std::vector<std::string>{"..", "../outside", "out/../../outside", "etc-link", "etc-link/passwd", "inner-link",
                                "data:escape", "data:escape/secret", "fifo", "missing"})
    EXPECT_EQ(Refusal(Run(Mounts(src))).error, Refusal::kBadMount) << src;
  EXPECT_NE(Refusal(Run(Mounts("etc-link"))).detail.find("symlink"), std::string::npos);
  const RunRequest ok = Accepted(Run(Mounts("out/deeper")));
  fault_hooks.skip_step = nullptr;
  ASSERT_FALSE(ok.mounts.empty());
  EXPECT_EQ(ok.mounts.back().source, tree_.Path("work/out/deeper"));
}

TEST_F(BrokerProtocol, DataSourcesNeedADataDirectory) {
  config_.data_dir.clear();
  EXPECT_EQ(Refusal(Run(Mounts("data:cache"))).error, Refusal::kBadMount);
}

TEST_F(BrokerProtocol, BadMountDestinations) {
  for (const std::string& dst :
       std::vector<std::string>{"relative", "", "/", "/a/../b", "/a:b", "/a,b", "C:\\work", "/a//b"}) {
    const Refused r = Refusal(Run(Mounts("out", dst)));
    EXPECT_EQ(r.error, Refusal::kBadMount) << dst << ": " << r.detail;
  }
  EXPECT_EQ(
      Refusal(Run({{"mounts", json::array({{{"src", "out"}, {"dst", "/m"}}, {{"src", "data:cache"}, {"dst", "/m"}}})}}))
          .error,
      Refusal::kBadMount);
}

TEST_F(BrokerProtocol, NetworkNeedsAnEgressGrant) {
  EXPECT_FALSE(Accepted(Run({{"network", "none"}})).network);
  EXPECT_EQ(Refusal(Run({{"network", "egress"}})).error, Refusal::kNetworkNotGranted);
  EXPECT_EQ(Refusal(Run({{"network", true}})).error, Refusal::kNetworkNotGranted);
  config_.network_granted = true;
  EXPECT_TRUE(Accepted(Run({{"network", "egress"}})).network);
  // Host networking is never granted, egress grant or not.
  EXPECT_EQ(Refusal(Run({{"network", "host"}})).error, Refusal::kNetworkNotGranted);
  EXPECT_EQ(Refusal(Run({{"network", "bridge"}})).error, Refusal::kBadRequest);
}

TEST_F(BrokerProtocol, LimitsStayWithinTheReservation) {
  const RunRequest run = Accepted(Run({{"cpus", 0.5}, {"mem_gb", 1}}));
  EXPECT_DOUBLE_EQ(run.cpus, 0.5);
  EXPECT_DOUBLE_EQ(run.mem_gb, 1);
  for (const json& extra : {json{{"cpus", 3}}, json{{"mem_gb", 2}}, json{{"cpus", 0}}, json{{"cpus", -1}},
                            json{{"timeout_s", 601}}, json{{"timeout_s", 0}}, json{{"cpus", "1"}}}) {
    const Refused r = Refusal(Run(extra));
    EXPECT_EQ(r.error, Refusal::kBadRequest) << extra.dump();
  }
  json no_timeout = Run();
  no_timeout.erase("timeout_s");
  EXPECT_EQ(Refusal(no_timeout).detail, "timeout_s: required");
}

TEST_F(BrokerProtocol, LimitsBelowWhatTheRuntimeExpressesAreRefused) {
  // 0.0001 CPU once became --cpus=0.000: no quota at all.
  for (const json& extra :
       {json{{"cpus", 0.0001}}, json{{"cpus", 1e-300}}, json{{"cpus", 0.00999}}, json{{"mem_gb", 1e-9}},
        json{{"mem_gb", 0.005}}, json{{"timeout_s", 0.001}}, json{{"timeout_s", 0.999}}, json{{"cpus", 5e-324}}}) {
    const Refused r = Refusal(Run(extra));
    EXPECT_EQ(r.error, Refusal::kBadRequest) << extra.dump();
    EXPECT_EQ(r.detail.rfind(extra.begin().key() + ": ", 0), 0u) << r.detail;
    EXPECT_NE(r.detail.find("smallest allowed value"), std::string::npos) << r.detail;
  }
  const RunRequest least = Accepted(Run({{"cpus", 0.01}, {"mem_gb", 6.0 / 1024}, {"timeout_s", 1}}));
  EXPECT_EQ(least.cpu_quota_us, 1000);
  EXPECT_EQ(least.memory_bytes, 6ll << 20);
  const RunRequest some = Accepted(Run({{"cpus", 0.123456}, {"mem_gb", 0.3}}));
  EXPECT_EQ(some.cpu_quota_us, 12345);
  EXPECT_EQ(some.memory_bytes % 4096, 0);
  EXPECT_LE(static_cast<double>(some.memory_bytes), 0.3 * (1 << 30));
}

TEST_F(BrokerProtocol, RuntimePathsAreNeverDestinations) {
  for (const std::string& dst :
       std::vector<std::string>{"/proc", "/proc/", "/proc/self", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm",
                                "/dev/null", "/etc/hosts", "/etc/resolv.conf", "/etc/hostname", "/run/.containerenv",
                                "/run/secrets", "/run/secrets/x", "/./proc", "/a/./b"}) {
    const Refused r = Refusal(Run(Mounts("out", dst)));
    EXPECT_EQ(r.error, Refusal::kBadMount) << dst << ": " << r.detail;
    EXPECT_EQ(r.detail.rfind("mounts[0].dst: ", 0), 0u) << r.detail;
  }
  for (const std::string& dst :
       std::vector<std::string>{"/procs", "/system", "/devices", "/etc/hosts.d", "/etc", "/run", "/out/proc"})
    EXPECT_EQ(Accepted(Run(Mounts("out", dst))).mounts[0].destination, dst);
  // One destination, however it is spelled.
  EXPECT_EQ(Accepted(Run(Mounts("out", "/out/"))).mounts[0].destination, "/out");
  EXPECT_EQ(Refusal(Run({{"mounts",
                          json::array({{{"src", "out"}, {"dst", "/m/"}}, {{"src", "data:cache"}, {"dst", "/m"}}})}}))
                .error,
            Refusal::kBadMount);
}

// Through the parser: whatever number a request carries, an accepted
// request has a CPU quota above zero and no larger than asked, and a
// memory limit no larger than asked.
RC_GTEST_PROP(BrokerLimits, EveryAcceptedRequestHasRealLimitsNoLargerThanAsked, ()) {
  BrokerConfig config;
  config.work_dir = "/";
  config.images = {{kRef, "linux/amd64"}};
  config.host_platform = "linux/amd64";
  config.cpus = *rc::gen::inRange(1, 409600) / 100.0;
  config.mem_gb = *rc::gen::inRange(6, 4096) / 1024.0;
  config.max_timeout_s = 600;
  auto number = [] {
    const double mantissa = *rc::gen::inRange(1, 1000000) / 100000.0;
    // Mostly near the limits, sometimes down to denormals.
    const int exponent = *rc::gen::inRange(0, 10) == 0 ? *rc::gen::inRange(-320, -3) : *rc::gen::inRange(-3, 2);
    return mantissa * std::pow(10.0, exponent);
  };
  const double cpus = number(), mem = number();
  const json req = {{"op", "container.run"}, {"image", kRef}, {"platform", "linux/amd64"},
                    {"timeout_s", 10},       {"cpus", cpus},  {"mem_gb", mem}};
  const Parsed parsed = ParseRequest(req.dump(), config);
  const auto* refused = std::get_if<Refused>(&parsed);
  RC_CLASSIFY(refused == nullptr, "accepted");
  if (refused != nullptr) {
    RC_ASSERT(refused->error == Refusal::kBadRequest);
    return;
  }
  const auto& run = std::get<RunRequest>(std::get<Request>(parsed));
  RC_ASSERT(run.cpu_quota_us >= kMinCpuQuotaUs);
  RC_ASSERT(static_cast<double>(run.cpu_quota_us) / kCpuPeriodUs <= cpus);
  RC_ASSERT(run.memory_bytes >= kMinMemoryBytes);
  RC_ASSERT(static_cast<double>(run.memory_bytes) / (1ll << 30) <= mem);
}

// Every accepted cpus gives a quota above zero and no larger than asked.
RC_GTEST_PROP(BrokerLimits, EveryAcceptedCpusHasARealQuotaNoLargerThanAsked, ()) {
  const int exponent = *rc::gen::inRange(-320, 4);
  const double mantissa = *rc::gen::inRange(1, 1000000) / 100000.0;
  const double cpus = mantissa * std::pow(10.0, exponent);
  const long long q = CpuQuotaUs(cpus);
  if (cpus >= kMinCpus && std::isfinite(cpus) && cpus <= 4096) {
    RC_ASSERT(q >= kMinCpuQuotaUs);
    RC_ASSERT(static_cast<double>(q) / kCpuPeriodUs <= cpus);
  } else if (cpus < kMinCpus) {
    RC_ASSERT(q == 0);
  }
  const long long m = MemoryBytes(cpus);
  if (m > 0) {
    RC_ASSERT(m >= kMinMemoryBytes);
    RC_ASSERT(static_cast<double>(m) / (1ll << 30) <= cpus);
  }
}

TEST_F(BrokerProtocol, MalformedRequests) {
  for (const std::string& line : std::vector<std::string>{
           "", "not json", "[]", "42", "{\"op\": 1}", "{\"op\": \"container.exec\"}", "{\"image\": \"x\"}",
           "{\"op\": \"status\", \"extra\": 1}", "{\"op\":\"container.run\"", "{\"op\":\"status\"}{}",
           std::string("{\"op\":\"status\"\0}", 16), "{\"op\":\"\xff\"}"}) {
    Parsed p = ParseRequest(line, config_);
    ASSERT_TRUE(std::holds_alternative<Refused>(p)) << line;
    EXPECT_EQ(std::get<Refused>(p).error, Refusal::kBadRequest) << line;
    EXPECT_FALSE(std::get<Refused>(p).detail.empty());
  }
  EXPECT_EQ(Refusal(Run({{"args", "sh -c x"}})).error, Refusal::kBadRequest);
  EXPECT_EQ(Refusal(Run({{"args", {1}}})).error, Refusal::kBadRequest);
  EXPECT_EQ(Refusal(Run({{"env", {{"A B", "x"}}}})).error, Refusal::kBadRequest);
  EXPECT_EQ(Refusal(Run({{"env", {{"A", 1}}}})).error, Refusal::kBadRequest);
  EXPECT_EQ(Refusal(Run({{"workdir", "relative"}})).error, Refusal::kBadRequest);
  EXPECT_EQ(Refusal(Run({{"privileged", true}})).detail, "privileged: unknown field");
  EXPECT_EQ(Refusal(Run({{"mounts", json::array({{{"src", "out"}, {"dst", "/m"}, {"type", "bind"}}})}})).error,
            Refusal::kBadRequest);
}

TEST_F(BrokerProtocol, OversizedRequests) {
  std::string big = Run({{"args", {std::string(kMaxRequestBytes, 'a')}}}).dump();
  EXPECT_EQ(std::get<Refused>(ParseRequest(big, config_)).detail,
            "request: longer than " + std::to_string(kMaxRequestBytes) + " bytes");
  json many = Run();
  many["args"] = std::vector<std::string>(kMaxArgs + 1, "a");
  EXPECT_EQ(Refusal(many).error, Refusal::kBadRequest);
  json mounts = Run();
  mounts["mounts"] = json::array();
  for (size_t i = 0; i <= kMaxMounts; ++i)
    mounts["mounts"].push_back({{"src", "out"}, {"dst", "/m" + std::to_string(i)}});
  EXPECT_NE(Refusal(mounts).detail.find("more than"), std::string::npos);
  // Nesting deep enough to hurt a recursive parser stays a refusal.
  EXPECT_EQ(std::get<Refused>(ParseRequest(std::string(30000, '[') + std::string(30000, ']'), config_)).error,
            Refusal::kBadRequest);
}

TEST_F(BrokerProtocol, PullAndStatus) {
  Parsed pull =
      ParseRequest(json{{"op", "container.pull"}, {"image", kRef}, {"platform", "linux/amd64"}}.dump(), config_);
  ASSERT_TRUE(std::holds_alternative<Request>(pull));
  EXPECT_TRUE(std::holds_alternative<PullRequest>(std::get<Request>(pull)));
  EXPECT_EQ(Refusal({{"op", "container.pull"}, {"image", "busybox"}, {"platform", "linux/amd64"}}).error,
            Refusal::kImageNotApproved);
  Parsed status = ParseRequest("{\"op\":\"status\"}", config_);
  ASSERT_TRUE(std::holds_alternative<Request>(status));
  EXPECT_TRUE(std::holds_alternative<StatusRequest>(std::get<Request>(status)));
}

TEST(BrokerReferences, DigestPinnedAndPlatforms) {
  EXPECT_TRUE(IsDigestPinned(kRef));
  EXPECT_TRUE(IsDigestPinned("docker.io/org/tool:1.2@sha256:" + std::string(64, '0')));
  EXPECT_FALSE(IsDigestPinned("docker.io/org/tool:1.2"));
  EXPECT_FALSE(IsDigestPinned("@sha256:" + std::string(64, '0')));
  EXPECT_FALSE(IsDigestPinned("tool@sha256:" + std::string(63, '0')));
  EXPECT_FALSE(IsDigestPinned("tool@sha256:" + std::string(64, 'A')));
  EXPECT_FALSE(IsDigestPinned("to ol@sha256:" + std::string(64, '0')));
  EXPECT_FALSE(IsDigestPinned("--privileged@sha256:" + std::string(64, '0')));
  EXPECT_TRUE(IsPlatform("linux/amd64"));
  EXPECT_TRUE(IsPlatform("linux/arm/v7"));
  EXPECT_FALSE(IsPlatform("linux"));
  EXPECT_FALSE(IsPlatform("linux//amd64"));
  EXPECT_FALSE(IsPlatform("Linux/AMD64"));
}

TEST(BrokerAnswers, InvalidUtf8IsReplacedNotThrown) {
  nlohmann::ordered_json a;
  a["ok"] = true;
  a["stdout_tail"] = std::string("\xff\xfe tail");
  const std::string line = AnswerLine(a);
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_TRUE(json::accept(line));
}

}  // namespace
}  // namespace oarbank::broker
