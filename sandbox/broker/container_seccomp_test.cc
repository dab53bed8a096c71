// The containers' seccomp profile: Podman's default with unix sockets out.
#include "sandbox/broker/container_seccomp.h"

#include <sys/socket.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace oarbank::broker {
namespace {

using json = nlohmann::json;

std::string DefaultProfile() {
  std::ifstream in(kDefaultSeccompProfile);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<json> RulesNaming(const json& profile, const char* name) {
  std::vector<json> out;
  for (const auto& rule : profile["syscalls"])
    for (const auto& n : rule["names"])
      if (n == name) out.push_back(rule);
  return out;
}

TEST(ContainerSeccomp, UnixSocketsAreRefusedAndTheMultiplexerIsGone) {
  const std::string base = DefaultProfile();
  if (base.empty()) GTEST_SKIP() << kDefaultSeccompProfile << " is not installed";
  auto made = ContainerSeccompProfile(base);
  ASSERT_TRUE(made.ok()) << made.error().what;
  const json profile = json::parse(made.value());
  const json original = json::parse(base);
  EXPECT_EQ(profile["defaultAction"], original["defaultAction"]);
  EXPECT_TRUE(RulesNaming(profile, "socketcall").empty()) << "its family cannot be read by a filter";
  EXPECT_FALSE(RulesNaming(profile, "socketpair").empty()) << "socketpair reaches nothing outside";
  for (const auto& rule : RulesNaming(profile, "socket")) {
    ASSERT_FALSE(rule["args"].empty()) << "no unconditional socket rule: " << rule.dump();
    const json& family = rule["args"][0];
    EXPECT_EQ(family["index"], 0);
    EXPECT_EQ(family["op"], "SCMP_CMP_EQ") << rule.dump();
    EXPECT_EQ(rule["action"], "SCMP_ACT_ALLOW");
    EXPECT_NE(family["value"], AF_UNIX) << "unix sockets get the default answer";
    EXPECT_TRUE(family["value"] == AF_INET || family["value"] == AF_INET6 || family["value"] == AF_PACKET ||
                family["value"] == AF_NETLINK)
        << rule.dump();
  }
  EXPECT_EQ(profile["defaultAction"], "SCMP_ACT_ERRNO") << "what no rule allows is refused";
  // Everything else the default allows, it still allows.
  for (const char* name : {"read", "connect", "bind", "clone", "execve"})
    EXPECT_FALSE(RulesNaming(profile, name).empty()) << name;
}

TEST(ContainerSeccomp, WhatIsNotAProfileIsRefused) {
  for (const char* text : {"", "[]", "{\"syscalls\": []}", "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": 3}",
                           "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [{\"names\": [\"read\"]}]}"})
    EXPECT_FALSE(ContainerSeccompProfile(text).ok()) << text;
}

}  // namespace
}  // namespace oarbank::broker
