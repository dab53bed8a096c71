#include "harness/expectations.h"

#include <fstream>
#include <set>
#include <sstream>

namespace oarbank {
namespace {

std::vector<std::string> SplitTabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, '\t');) out.push_back(field);
  return out;
}

}  // namespace

const char* ExpectName(Expect expect) {
  switch (expect) {
    case Expect::kBlocked: return "blocked";
    case Expect::kKilled: return "killed";
    case Expect::kAllowed: return "allowed";
    case Expect::kGap: return "gap";
    case Expect::kContained: return "contained";
    case Expect::kRefused: return "refused";
  }
  return "?";
}

Expected<Expectations> Expectations::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{path, "cannot read the expectations table"};
  Expectations table;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (number == 1 || line.empty() || line[0] == '#') continue;  // header
    const auto f = SplitTabs(line);
    const std::string where = path + ":" + std::to_string(number);
    if (f.size() != 6) return Error{where, "expected 6 tab-separated fields, got " + std::to_string(f.size())};
    Expectation e;
    e.probe = f[0];
    e.policy = f[1];
    e.line = number;
    try {
      e.min_abi = std::stoi(f[2]);
    } catch (...) {
      return Error{where, "min_abi: expected an integer"};
    }
    if (e.probe == "(policy)") {
      if (f[3] != "runs") return Error{where, "a (policy) row's expect is \"runs\""};
      table.policy_min_abi_[e.policy] = e.min_abi;
      continue;
    }
    if (f[3] == "blocked")
      e.expect = Expect::kBlocked;
    else if (f[3] == "killed")
      e.expect = Expect::kKilled;
    else if (f[3] == "allowed")
      e.expect = Expect::kAllowed;
    else if (f[3] == "gap")
      e.expect = Expect::kGap;
    else if (f[3] == "contained")
      e.expect = Expect::kContained;
    else if (f[3] == "refused")
      e.expect = Expect::kRefused;
    else
      return Error{where, "expect: one of blocked, killed, allowed, gap, contained, refused"};
    e.code = f[4];
    e.why = f[5];
    if (e.expect == Expect::kBlocked && e.code.rfind("E", 0) != 0 && e.code != "-")
      return Error{where, "blocked needs an errno name such as EPERM, or - when no call fails (a value not found)"};
    if (e.expect == Expect::kRefused && e.code != "64" && e.code != "70")
      return Error{where,
                   "refused needs the launcher's exit code: 64 (a path it refuses) or 70 (what it cannot enforce)"};
    if (e.expect == Expect::kKilled && e.code.rfind("SIG", 0) != 0)
      return Error{where, "killed needs a signal name such as SIGSYS"};
    if (!table.rows_.emplace(std::make_pair(e.probe, e.policy), e).second)
      return Error{where, "a second row for " + e.probe + " under " + e.policy};
  }
  return table;
}

const Expectation* Expectations::Find(const std::string& probe, const std::string& policy, int abi) const {
  const auto own = rows_.find({probe, policy});
  if (own != rows_.end() && abi >= own->second.min_abi) return &own->second;
  if (auto it = rows_.find({probe, "*"}); it != rows_.end()) return &it->second;
  return own != rows_.end() ? &own->second : nullptr;
}

int Expectations::PolicyMinAbi(const std::string& policy) const {
  auto it = policy_min_abi_.find(policy);
  if (it == policy_min_abi_.end()) it = policy_min_abi_.find("*");
  return it == policy_min_abi_.end() ? 0 : it->second;
}

std::vector<std::string> Expectations::Probes() const {
  std::set<std::string> names;
  for (const auto& [key, row] : rows_) names.insert(key.first);
  return {names.begin(), names.end()};
}

}  // namespace oarbank
