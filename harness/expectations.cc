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
    if (f.size() != 7) return Error{where, "expected 7 tab-separated fields, got " + std::to_string(f.size())};
    Expectation e;
    e.probe = f[0];
    e.policy = f[1];
    e.entry = f[2];
    e.line = number;
    if (e.entry != "*" && e.entry != "sandbox-exec" && e.entry != "run")
      return Error{where, "entry: one of *, sandbox-exec, run"};
    try {
      e.min_abi = std::stoi(f[3]);
    } catch (...) {
      return Error{where, "min_abi: expected an integer"};
    }
    if (e.probe == "(policy)") {
      if (f[4] != "runs") return Error{where, "a (policy) row's expect is \"runs\""};
      table.policy_min_abi_[e.policy] = e.min_abi;
      continue;
    }
    if (f[4] == "blocked")
      e.expect = Expect::kBlocked;
    else if (f[4] == "killed")
      e.expect = Expect::kKilled;
    else if (f[4] == "allowed")
      e.expect = Expect::kAllowed;
    else if (f[4] == "gap")
      e.expect = Expect::kGap;
    else if (f[4] == "contained")
      e.expect = Expect::kContained;
    else if (f[4] == "refused")
      e.expect = Expect::kRefused;
    else
      return Error{where, "expect: one of blocked, killed, allowed, gap, contained, refused"};
    if (e.expect == Expect::kContained && e.entry == "sandbox-exec")
      return Error{where, "contained runs under the supervisor: its entry is * or run"};
    e.code = f[5];
    e.why = f[6];
    if (e.expect == Expect::kBlocked && e.code.rfind("E", 0) != 0 && e.code != "-")
      return Error{where, "blocked needs an errno name such as EPERM, or - when no call fails (a value not found)"};
    if (e.expect == Expect::kRefused && e.code != "64" && e.code != "70")
      return Error{where,
                   "refused needs the launcher's exit code: 64 (a path it refuses) or 70 (what it cannot enforce)"};
    if (e.expect == Expect::kKilled && e.code.rfind("SIG", 0) != 0)
      return Error{where, "killed needs a signal name such as SIGSYS"};
    if (!table.rows_.emplace(std::make_tuple(e.probe, e.policy, e.entry), e).second)
      return Error{where, "a second row for " + e.probe + " under " + e.policy + " (entry " + e.entry + ")"};
  }
  return table;
}

const Expectation* Expectations::Row(const std::string& probe, const std::string& policy,
                                     const std::string& entry) const {
  if (auto it = rows_.find({probe, policy, entry}); it != rows_.end()) return &it->second;
  if (auto it = rows_.find({probe, policy, "*"}); it != rows_.end()) return &it->second;
  return nullptr;
}

const Expectation* Expectations::Find(const std::string& probe, const std::string& policy, int abi,
                                      const std::string& entry) const {
  const Expectation* own = Row(probe, policy, entry);
  if (own != nullptr && abi >= own->min_abi) return own;
  if (const Expectation* any = Row(probe, "*", entry)) return any;
  return own;
}

int Expectations::PolicyMinAbi(const std::string& policy) const {
  auto it = policy_min_abi_.find(policy);
  if (it == policy_min_abi_.end()) it = policy_min_abi_.find("*");
  return it == policy_min_abi_.end() ? 0 : it->second;
}

std::vector<std::string> Expectations::Probes() const {
  std::set<std::string> names;
  for (const auto& [key, row] : rows_) names.insert(std::get<0>(key));
  return {names.begin(), names.end()};
}

}  // namespace oarbank
