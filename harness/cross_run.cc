#include "harness/cross_run.h"

#include <errno.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace oarbank {
namespace {

// Directories every identity the battery runs as may write in (the world's
// grants are the same), and files of root's that only a grant could expose.
bool MakeDir(const std::string& dir, mode_t mode) {
  if (mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return false;
  return chmod(dir.c_str(), mode) == 0;
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  return chmod(path.c_str(), mode) == 0;
}

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size())
    text.replace(pos, from.size(), to);
}

}  // namespace

bool IsCrossRunProbe(const std::string& probe) { return probe.starts_with("crossrun_"); }

Expected<CrossRunLayout> MakeCrossRunLayout(const std::string& world_root, const std::string& policy_path,
                                            const std::string& id, bool runner) {
  CrossRunLayout l;
  l.dir = world_root + "/crossrun/" + id;
  l.grant = l.dir + (runner ? "/work" : "/data");
  l.elsewhere = l.dir + "/elsewhere";
  bool ok = MakeDir(world_root + "/crossrun", 0755) && MakeDir(l.dir, 0755);
  for (const char* grant : {"/work", "/data"}) {
    const std::string g = l.dir + grant;
    for (const auto& d : {g, g + "/tmp", g + "/first-run-tmp", g + "/agent", g + "/agent/state", g + "/carved"})
      ok = ok && MakeDir(d, 0777);
    ok = ok && WriteFile(g + "/carved/victim", "carved\n", 0666);
  }
  ok = ok && MakeDir(l.elsewhere, 0755) && MakeDir(l.elsewhere + "/state", 0755) &&
       WriteFile(l.elsewhere + "/secret", "crossrun secret\n", 0644) &&
       WriteFile(l.elsewhere + "/state/secret", "crossrun secret\n", 0644);
  if (!ok) return Error{l.dir, std::string("cannot make the cross-run layout: ") + strerror(errno)};

  std::ifstream in(policy_path);
  std::stringstream text;
  text << in.rdbuf();
  std::string second = text.str();
  for (const char* grant : {"/work", "/data"}) ReplaceAll(second, "\"" + world_root + grant, "\"" + l.dir + grant);
  auto first = nlohmann::json::parse(second, nullptr, false);
  if (!first.is_object()) return Error{policy_path, "not a JSON object"};
  first.erase("state");
  first.erase("read_only");
  first["tmp"] = l.grant + "/first-run-tmp";
  l.first_policy = l.dir + "/first.json";
  l.second_policy = l.dir + "/second.json";
  if (!WriteFile(l.first_policy, first.dump(), 0644) || !WriteFile(l.second_policy, second, 0644))
    return Error{l.dir, std::string("cannot write its policies: ") + strerror(errno)};
  return l;
}

}  // namespace oarbank
