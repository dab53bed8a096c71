#include "sandbox/broker/container_seccomp.h"

#include <sys/socket.h>

#include <nlohmann/json.hpp>

namespace oarbank::broker {
namespace {

using json = nlohmann::ordered_json;

json Arg(int index, long value, const char* op) {
  return {{"index", index}, {"value", value}, {"valueTwo", 0}, {"op", op}};
}

json SocketRule(const char* action, json args) {
  json rule = {{"names", {"socket"}}, {"action", action}, {"args", std::move(args)}};
  return rule;
}

}  // namespace

Expected<std::string> ContainerSeccompProfile(const std::string& default_profile) {
  json profile = json::parse(default_profile, nullptr, /*allow_exceptions=*/false);
  if (!profile.is_object() || !profile.contains("syscalls") || !profile["syscalls"].is_array() ||
      !profile.contains("defaultAction"))
    return Error{"seccomp profile", "not a containers seccomp profile (no defaultAction or syscalls)"};
  json kept = json::array();
  bool had_socket = false;
  for (json rule : profile["syscalls"]) {
    if (!rule.is_object() || !rule.contains("names") || !rule["names"].is_array())
      return Error{"seccomp profile", "a syscalls entry without names"};
    json names = json::array();
    for (const auto& name : rule["names"]) {
      if (name == "socket" || name == "socketcall") {
        had_socket = had_socket || name == "socket";
        continue;
      }
      names.push_back(name);
    }
    if (names.empty()) continue;
    rule["names"] = std::move(names);
    kept.push_back(std::move(rule));
  }
  if (!had_socket) return Error{"seccomp profile", "it names no socket rule to replace"};
  kept.push_back(SocketRule("SCMP_ACT_ALLOW", json::array({Arg(0, AF_INET, "SCMP_CMP_EQ")})));
  kept.push_back(SocketRule("SCMP_ACT_ALLOW", json::array({Arg(0, AF_INET6, "SCMP_CMP_EQ")})));
  kept.push_back(SocketRule("SCMP_ACT_ALLOW", json::array({Arg(0, AF_PACKET, "SCMP_CMP_EQ")})));
  // NETLINK_AUDIT (9) stays refused, as in the default profile.
  kept.push_back(
      SocketRule("SCMP_ACT_ALLOW", json::array({Arg(0, AF_NETLINK, "SCMP_CMP_EQ"), Arg(2, 9, "SCMP_CMP_NE")})));
  // AF_UNIX has no rule: it gets the profile's default answer. An explicit
  // errno rule for it cannot stand beside the allowed families' rules on
  // the same argument (libseccomp refuses the filter: EEXIST).
  profile["syscalls"] = std::move(kept);
  return profile.dump(1) + "\n";
}

}  // namespace oarbank::broker
