#include "sandbox/cli/mutation_points.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "sandbox/common/exit_codes.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/seccomp/filter.h"

namespace oarbank {
namespace {

// Landlock's rights and scopes by bit, as the kernel's UAPI names them.
constexpr const char* kFsRights[] = {"execute",   "write_file", "read_file", "read_dir",  "remove_dir",  "remove_file",
                                     "make_char", "make_dir",   "make_reg",  "make_sock", "make_fifo",   "make_block",
                                     "make_sym",  "refer",      "truncate",  "ioctl_dev", "resolve_unix"};
constexpr const char* kNetRights[] = {"bind_tcp", "connect_tcp", "bind_udp", "connect_send_udp"};
constexpr const char* kScopes[] = {"abstract_unix_socket", "signal"};

// The launch steps a mutant may leave out: every one but the exec itself.
constexpr LaunchStep kSteps[] = {
    LaunchStep::kPlacement,      LaunchStep::kCloseFds, LaunchStep::kNoNewPrivs,       LaunchStep::kCoreDumps,
    LaunchStep::kMountNamespace, LaunchStep::kTerminal, LaunchStep::kDropCapabilities, LaunchStep::kLandlock,
    LaunchStep::kSeccomp,        LaunchStep::kGate};

// What the code leaves out under a skip-step name (common/fault_hooks.h),
// by layer; `supervised_only` for what only a job of `run` has.
struct Skip {
  const char* name;
  const char* layer;
  const char* what;
  bool supervised_only;
};
constexpr Skip kSkips[] = {
    {"seccomp-above-table", "seccomp", "ENOSYS above the syscall table", false},
    {"grant-inodes", "mount", "the launcher's inode check of each grant it binds", false},
    {"grant-nosuid", "mount", "nosuid on the writable grants", false},
    {"grant-nodev", "mount", "nodev on the writable grants", false},
    {"environment-filter", "environment", "the module environment built from nothing (the caller's passes)", false},
    {"job-devices", "job", "the job's own devpts and /dev/shm", true},
    {"namespace-pid", "job", "the job's pid namespace", true},
    {"namespace-ipc", "job", "the job's ipc namespace", true},
    {"namespace-uts", "job", "the job's uts namespace", true},
    {"namespace-net", "job", "the job's network namespace", true},
    {"job-proc", "job", "the job's own /proc, of its pid namespace", true},
    {"gate-status", "gate", "NoNewPrivs, Seccomp and the capability sets read at the gate", true},
    {"gate-core-limit", "gate", "RLIMIT_CORE read at the gate", true},
    {"gate-cgroup", "gate", "the cgroup leaf read at the gate", true},
    {"gate-fresh-namespaces", "gate", "the fresh namespaces read at the gate", true},
    {"gate-read-only-root", "gate", "the read-only / read at the gate", true},
    {"gate-noexec", "gate", "the noexec writable grants read at the gate", true},
    {"gate-read-only-carve-outs", "gate", "the read-only carve-outs read at the gate", true},
    {"gate-inodes", "gate", "each grant's inode read back at the gate", true},
    {"gate-root-etc", "gate", "root's idmapped /etc read at the gate", true},
    {"gate-job-devices", "gate", "the job's own devices read at the gate", true},
};

std::string Slug(std::string s) {
  for (char& c : s)
    if (c == ' ' || c == '/') c = '-';
  return s;
}

// A row as the filter sees it, and when it applies: two rows of the table
// never share one.
std::string RowKey(const SeccompRule& rule, SeccompArch arch) {
  return SeccompRowsKey({rule}, arch) + WhenName(rule.when);
}

// A row's index in the seccomp table, or -1.
int TableIndex(const SeccompRule& rule, SeccompArch arch) {
  const auto& table = SeccompRuleTable();
  const std::string key = RowKey(rule, arch);
  for (size_t i = 0; i < table.size(); ++i)
    if (RowKey(table[i], arch) == key) return static_cast<int>(i);
  return -1;
}

void AddBits(std::vector<MutationPoint>& out, uint64_t bits, const char* prefix, const char* const* names, size_t count,
             const char* what) {
  for (size_t bit = 0; bit < count; ++bit)
    if (bits & (1ull << bit)) {
      const std::string id = std::string(prefix) + names[bit];
      out.push_back({id, "landlock", std::string(what) + " " + names[bit], "OARBANK_FAULT_MUTANT", id});
    }
}

void AddPlanPoints(std::vector<MutationPoint>& out, const Plan& plan) {
  for (const auto& rule : plan.seccomp) {
    const int i = TableIndex(rule, plan.seccomp_arch);
    const std::string id = "seccomp." + std::to_string(i) + "." + rule.syscall;
    const std::string cond = DescribeCondition(rule);
    out.push_back({id, "seccomp", rule.syscall + "(" + cond + ") answers errno " + std::to_string(rule.err),
                   "OARBANK_FAULT_MUTANT", id});
  }
  const LandlockPlan& ll = plan.landlock;
  AddBits(out, ll.handled_fs, "landlock.fs.", kFsRights, std::size(kFsRights), "the handled filesystem right");
  AddBits(out, ll.handled_net, "landlock.net.", kNetRights, std::size(kNetRights), "the handled network right");
  AddBits(out, ll.scoped, "landlock.scope.", kScopes, std::size(kScopes), "the scope");
  std::set<std::string> sources;
  for (const auto& rule : ll.paths) sources.insert(rule.source);
  for (const auto& source : sources) {
    const std::string id = "landlock.widen." + Slug(source);
    out.push_back(
        {id, "landlock", "the " + source + " path rules, given every handled right", "OARBANK_FAULT_MUTANT", id});
  }
  if (plan.read_only_mounts)
    out.push_back({"mount.read-only", "mount", "every mount but the writable grants read-only", "OARBANK_FAULT_MUTANT",
                   "mount.read-only"});
  if (plan.writable_noexec)
    out.push_back(
        {"mount.noexec", "mount", "the writable grants mounted noexec", "OARBANK_FAULT_MUTANT", "mount.noexec"});
  if (!plan.read_only_binds.empty())
    out.push_back({"mount.read-only-carve-outs", "mount", "the read_only carve-outs bound read-only",
                   "OARBANK_FAULT_SKIP_STEP", "read-only-carve-outs"});
}

}  // namespace

std::vector<MutationPoint> MutationPoints(const Plan& plan, NetMode net) {
  std::vector<MutationPoint> out;
  AddPlanPoints(out, plan);
  for (LaunchStep step : kSteps)
    out.push_back({std::string("launch.") + StepName(step), "launch", std::string("the launch step ") + StepName(step),
                   "OARBANK_FAULT_SKIP_STEP", StepName(step)});
  for (const Skip& s : kSkips)
    out.push_back(
        {std::string(s.layer) + "." + s.name, s.layer, s.what, "OARBANK_FAULT_SKIP_STEP", s.name, s.supervised_only});
  if (net == NetMode::kEgressAny)
    for (const auto& [name, what] : {std::pair{"job-ruleset-classes", "non-public address classes"},
                                     {"job-ruleset-host-addresses", "host addresses"}})
      out.push_back({std::string("egress.") + name, "egress", std::string("the egress-any ruleset's ") + what,
                     "OARBANK_FAULT_SKIP_STEP", name, true});
  // The proxy serves a job of `run` only (sandbox-exec has none): each
  // check that refuses a destination, and each limit on what one client
  // takes of it (proxy_session.cc).
  if (net == NetMode::kEgressAllowlist)
    for (const auto& [name, what] :
         {std::pair{"proxy-host-names", "refusal of IP literals and loopback names (localhost)"},
          {"proxy-allowlist", "allowlist match of the requested host and port"},
          {"proxy-public-only", "refusal of a name that resolves to a non-public address"},
          {"proxy-own-host", "refusal of a name that resolves to an address of its own host"},
          {"proxy-wildcard-rate", "rate limit on lookups of names under a wildcard entry"},
          {"proxy-head-limit", "limit on a request head's size"},
          {"proxy-connection-caps", "caps on its connections, in all and from one client"}})
      out.push_back({std::string("egress.") + name, "egress", std::string("the job's proxy's ") + what,
                     "OARBANK_FAULT_SKIP_STEP", name, true});
  return out;
}

bool RemovePlanPoint(const std::string& id, Plan& plan) {
  auto starts = [&](const char* prefix) { return id.rfind(prefix, 0) == 0; };
  auto bit_of = [&](const char* const* names, size_t count, const std::string& name) -> uint64_t {
    for (size_t bit = 0; bit < count; ++bit)
      if (name == names[bit]) return 1ull << bit;
    return 0;
  };
  LandlockPlan& ll = plan.landlock;
  if (starts("seccomp.")) {
    const int index = atoi(id.c_str() + 8);
    const auto& table = SeccompRuleTable();
    if (index < 0 || static_cast<size_t>(index) >= table.size()) return false;
    const std::string key = RowKey(table[index], plan.seccomp_arch);
    return std::erase_if(plan.seccomp, [&](const SeccompRule& r) { return RowKey(r, plan.seccomp_arch) == key; }) > 0;
  }
  if (starts("landlock.fs.")) {
    const uint64_t bit = bit_of(kFsRights, std::size(kFsRights), id.substr(12));
    ll.handled_fs &= ~bit;
    for (auto& rule : ll.paths) rule.access &= ~bit;
    return bit != 0;
  }
  if (starts("landlock.net.")) {
    const uint64_t bit = bit_of(kNetRights, std::size(kNetRights), id.substr(13));
    ll.handled_net &= ~bit;
    for (auto& rule : ll.ports) rule.access &= ~bit;
    // A port rule left with no right is gone with it (Landlock refuses an
    // empty rule, which would refuse the whole launch instead).
    std::erase_if(ll.ports, [](const auto& rule) { return rule.access == 0; });
    return bit != 0;
  }
  if (starts("landlock.scope.")) {
    const uint64_t bit = bit_of(kScopes, std::size(kScopes), id.substr(15));
    ll.scoped &= ~bit;
    return bit != 0;
  }
  if (starts("landlock.widen.")) {
    bool any = false;
    for (auto& rule : ll.paths)
      if (Slug(rule.source) == id.substr(15)) {
        rule.access = ll.handled_fs;
        any = true;
      }
    return any;
  }
  if (id == "mount.read-only") return !(plan.read_only_mounts = false);
  if (id == "mount.noexec") return !(plan.writable_noexec = false);
  return false;
}

int MutationPointsMain(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: oarbank-agent-faulty mutation-points POLICY.json\n");
    return kExitUsage;
  }
  auto policy = LoadPolicyFile(argv[2]);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return PolicyErrorExit(policy.error());
  }
  HostFacts host = ProbeHost();
  ProbeRootEtc(host);
  const Plan plan = PlanConfinement(policy.value(), host);
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const auto& p : MutationPoints(plan, policy.value().net().mode))
    points.push_back({{"id", p.id},
                      {"layer", p.layer},
                      {"what", p.what},
                      {"env", {{p.var, p.value}}},
                      {"supervised_only", p.supervised_only}});
  std::cout << points.dump() << "\n";
  return 0;
}

}  // namespace oarbank
