#include "harness/battery.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <shared_mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/agent_facts.h"
#include "harness/cross_run.h"
#include "harness/judge.h"
#include "harness/mutants.h"
#include "harness/probe_spawn.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/environment.h"

namespace oarbank {
namespace fs = std::filesystem;
namespace {

constexpr int kTimeoutMs = 10000;

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// A crossrun_git_* probe under the coding-agent policy runs under `cage`
// with the run's writable grant as its worktree (--writable): .git pointers
// mean something to `cage` alone, which reads them and grants what they name.
constexpr char kCagePolicy[] = "runner_agent";
bool IsCageRun(const std::string& probe, const std::string& policy) {
  return probe.starts_with("crossrun_git_") && policy == kCagePolicy;
}

// A probe of what only a supervised job has (its own devpts and /dev/shm)
// runs under `run`, whatever its row expects.
bool IsJobProbe(const std::string& probe) { return probe.rfind("job_", 0) == 0; }

bool Selected(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

// A daemon a probe left: evidence, then killed. It holds a write lock on its
// pidfile while it lives; F_GETLK names the holder in this process's pid
// namespace, so a pid written inside a job's namespace is never trusted.
void ReapDaemon(const std::string& pidfile, std::vector<std::string>& evidence) {
  const int fd = open(pidfile.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK) {
    evidence.push_back("daemon pid " + std::to_string(lock.l_pid) + " outlived the job");
    if (lock.l_pid > 1) kill(lock.l_pid, SIGKILL);
  }
  close(fd);
}

// Every built probe and battery policy, or those asked for. A name asked for
// that is not there is a typo, never a smaller battery.
std::optional<Error> SelectProbesAndPolicies(const BatteryOptions& o, BatteryResult& result) {
  for (const auto& entry : fs::directory_iterator(o.probe_dir))
    if (entry.is_regular_file() && Selected(o.only_probes, entry.path().filename().string()))
      result.probes.push_back(entry.path().filename().string());
  result.probes = Sorted(result.probes);
  for (const auto& entry : fs::directory_iterator(o.policy_dir))
    if (entry.path().extension() == ".json" && Selected(o.only_policies, entry.path().stem().string()))
      result.policies.push_back(entry.path().stem().string());
  result.policies = Sorted(result.policies);
  for (const auto& name : o.only_probes)
    if (std::find(result.probes.begin(), result.probes.end(), name) == result.probes.end())
      return Error{"--probe " + name, "no such probe in " + o.probe_dir};
  for (const auto& name : o.only_policies)
    if (std::find(result.policies.begin(), result.policies.end(), name) == result.policies.end())
      return Error{"--policy " + name, "no such battery policy in " + o.policy_dir};
  if (result.probes.empty()) return Error{o.probe_dir, "no probes found"};
  if (result.policies.empty()) return Error{o.policy_dir, "no battery policies found"};
  return std::nullopt;
}

// The roots of a policy's writable grants, colon-separated: what a probe
// that acts on every writable grant (exec_written_file) is given.
std::string WritableGrants(const Policy& policy) {
  std::string out;
  auto add = [&](const std::string& dir) { out += (out.empty() ? "" : ":") + dir; };
  for (const auto* grant : {&policy.work(), &policy.data(), &policy.tmp()})
    if (grant->has_value()) add(**grant);
  for (const auto& dir : policy.state()) add(dir);
  return out;
}

// One battery run over a world: each probe unconfined, then under every
// policy as every uid.
class BatteryRun {
 public:
  // `agent`: what the agent said of itself (agent_facts.h).
  BatteryRun(const BatteryOptions& o, const Expectations& table, World& world, BatteryResult& result, AgentFacts agent)
      : o_(o),
        table_(table),
        world_(world),
        result_(result),
        agent_(std::move(agent)),
        egress_any_unenforceable_(agent_.egress_any_unenforceable) {}

  // Writes each battery policy into the world and parses it.
  std::optional<Error> LoadPolicies() {
    for (const auto& name : result_.policies) {
      auto path = MaterializePolicy(world_, o_.policy_dir + "/" + name + ".json", name);
      if (!path.ok()) return path.error();
      auto policy = LoadPolicyFile(path.value());
      if (!policy.ok()) return Error{name, PolicyErrorLine(policy.error())};
      policy_paths_.push_back(path.value());
      policies_.push_back(policy.value());
      result_.policy_classes.push_back(PolicyClass(policy.value()));
    }
    return std::nullopt;
  }

  // Workers take whole probes, so each probe's runs stay in order and what
  // the world sees is attributed by the probe's name.
  void RunAll() {
    result_.unconfined.resize(result_.probes.size());
    per_probe_.resize(result_.probes.size());
    std::vector<std::thread> workers;
    for (int j = 0; j < std::max(1, o_.jobs); ++j) workers.emplace_back([this] { Worker(); });
    for (auto& w : workers) w.join();
    for (auto& cells : per_probe_)
      result_.confined.insert(result_.confined.end(), std::make_move_iterator(cells.begin()),
                              std::make_move_iterator(cells.end()));
    result_.both_entries = o_.both_entries;
  }

  // Anything a probe moved into the outer cgroup is killed with the world.
  void KillLeftovers() {
    if (world_.cgroup_dir.empty()) return;
    std::ifstream procs(world_.cgroup_dir + "/cgroup.procs");
    for (long pid; procs >> pid;) kill(static_cast<pid_t>(pid), SIGKILL);
  }

 private:
  void Worker() {
    SignalSinks sinks;  // this worker's own: what is pending there is its probe's
    for (size_t i; (i = next_++) < result_.probes.size();) {
      const std::string& probe = result_.probes[i];
      result_.unconfined[i] = RunUnconfined(probe, sinks);
      std::optional<Evidence> last;  // what the unconfined run changed is no evidence: observe afresh
      for (size_t p = 0; p < result_.policies.size(); ++p)
        for (const std::string& entry : Entries(probe, p))
          for (uid_t uid : o_.uids) {
            per_probe_[i].push_back(RunConfined(probe, p, uid, last, sinks, entry));
            SettleAbsentRoute(per_probe_[i].back(), result_.unconfined[i]);
          }
    }
  }

  // The entry points a probe's cells run under for a policy: the cage for
  // a crossrun_git_* probe under the coding-agent policy; the supervisor
  // where only a job has what it tests (job_*), where only containment stops
  // it (contained) and for egress-any and ipc "job"; else the bare launcher and the
  // supervisor (only the bare launcher with --single-entry).
  std::vector<std::string> Entries(const std::string& probe, size_t policy_index) const {
    const std::string& name = result_.policies[policy_index];
    if (IsCageRun(probe, name)) return {"cage"};
    const Expectation* row = table_.Find(probe, name, result_.abi, "sandbox-exec");
    // egress-any and ipc "job" are run's alone: sandbox-exec refuses them.
    if (IsJobProbe(probe) || policies_[policy_index].net().mode == NetMode::kEgressAny ||
        policies_[policy_index].ipc() == IpcMode::kJob || (row != nullptr && row->expect == Expect::kContained))
      return {"run"};
    if (o_.both_entries) return {"sandbox-exec", "run"};
    return {"sandbox-exec"};
  }

  // Per run: a fresh outside dir and writable subdirectory, and the probe's
  // variables. `grant` is the writable grant the run's role has: work for a
  // runner, data otherwise.
  std::map<std::string, std::string> Prepare(const std::string& probe, uid_t uid, const std::string& grant,
                                             std::string& outside_dir, SignalSinks& sinks) {
    const std::string id = "run-" + std::to_string(++run_number_);
    outside_dir = world_.outside + "/" + id;
    const std::string writable = grant + "/" + id;
    // Plain syscalls: this runs before each of the battery's ~1,500 runs.
    for (const auto& d : {outside_dir, writable}) {
      mkdir(d.c_str(), 0777);
      chmod(d.c_str(), 0777);
      (void)!chown(d.c_str(), uid, uid);
    }
    // A file of the run's own uid outside the grants, for truncate and link
    // probes: only the cage, not file permissions, may stop them.
    const std::string victim = outside_dir + "/" + probe + ".victim";
    if (const int fd = open(victim.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666); fd >= 0) {
      constexpr char kText[] = "outside the grants\n";
      (void)!write(fd, kText, sizeof kText - 1);
      (void)!fchmod(fd, 0666);
      (void)!fchown(fd, uid, uid);
      close(fd);
    }
    // And a directory, for the removal probes.
    const std::string victim_dir = victim + ".d";
    mkdir(victim_dir.c_str(), 0777);
    (void)!chown(victim_dir.c_str(), uid, uid);
    const auto outside_pid =
        world_.outside_pid.count(uid) ? world_.outside_pid.at(uid) : world_.outside_pid.begin()->second;
    const pid_t sink = sinks.For(uid);  // -1 if it could not start: unset, so the probe errors
    std::map<std::string, std::string> vars = {
        {"OARBANK_PROBE_BUNDLE", world_.bundle},
        {"OARBANK_PROBE_WRITABLE", writable},
        {"OARBANK_PROBE_DATA", world_.data},
        {"OARBANK_PROBE_SECRET", world_.secret},
        {"OARBANK_PROBE_OUTSIDE_DIR", outside_dir},
        {"OARBANK_PROBE_UNIX_SOCKET", world_.unix_socket},
        {"OARBANK_PROBE_UNIX_DGRAM_SOCKET", world_.unix_dgram_socket},
        {"OARBANK_PROBE_UNIX_SOCKET_WORK", world_.unix_socket_work},
        {"OARBANK_PROBE_UNIX_SOCKET_TMP", world_.unix_socket_tmp},
        {"OARBANK_PROBE_UNIX_SOCKET_DATA", world_.unix_socket_data},
        {"OARBANK_PROBE_ABSTRACT_SOCKET", world_.abstract_name},
        {"OARBANK_PROBE_TCP_PORT", std::to_string(world_.tcp_port)},
        {"OARBANK_PROBE_PROXY_PORT", std::to_string(world_.proxy_port)},
        {"OARBANK_PROBE_UDP_PORT", std::to_string(world_.udp_port)},
        {"OARBANK_PROBE_OUTSIDE_PID", std::to_string(outside_pid)},
        // The job's init is pid 1 under run (RunConfined); elsewhere there is none.
        {"OARBANK_PROBE_INIT_PID", std::to_string(outside_pid)},
        {"OARBANK_PROBE_SIGNAL_SINK_PID", sink > 0 ? std::to_string(sink) : ""},
        {"OARBANK_PROBE_INHERITED_FD", std::to_string(world_.inherited_fd)},
        {"OARBANK_PROBE_INHERITED_HIGH_FD", std::to_string(world_.inherited_high_fd)},
        {"OARBANK_PROBE_SETUID_HELPER", world_.setuid_helper},
        {"OARBANK_PROBE_CGROUP_PROCS", world_.cgroup_dir.empty() ? "" : world_.cgroup_dir + "/cgroup.procs"},
        {"OARBANK_PROBE_PIDFILE", writable + "/daemon.pid"},
        {"OARBANK_PROBE_GPU_NODE", world_.gpu_node},
        {"OARBANK_PROBE_SYSV_MSG_ID", world_.sysv_msg_id < 0 ? "" : std::to_string(world_.sysv_msg_id)},
        {"OARBANK_PROBE_MQUEUE", world_.mqueue_name},
        {"OARBANK_PROBE_HOST_SHM", world_.host_shm_file},
        {"OARBANK_PROBE_HOST_PTY", world_.host_pty},
        {"OARBANK_PROBE_SYSCALL_TABLE_END",
         agent_.syscall_table_end < 0 ? "" : std::to_string(agent_.syscall_table_end)},
        {"OARBANK_PROBE_SYSCALLS_ABOVE_TABLE", agent_.kernel_syscalls_above},
    };
    if (world_.net) AddNetworkWorld(vars);
    return vars;
  }

  // The network world's targets (network_world.h); unset without one, where
  // the egress probes say unsupported.
  static void AddNetworkWorld(std::map<std::string, std::string>& vars) {
    auto list = [](const std::vector<Decoy>& decoys, std::string extra) {
      for (const auto& d : decoys) extra += (extra.empty() ? "" : ",") + std::string(d.address);
      return extra;
    };
    vars["OARBANK_PROBE_EGRESS_PORT"] = std::to_string(kEgressPort);
    vars["OARBANK_PROBE_PUBLIC4"] = kPublic4;
    vars["OARBANK_PROBE_PUBLIC6"] = kPublic6;
    // The IPv4-mapped form of a private decoy travels as IPv4.
    vars["OARBANK_PROBE_NONPUBLIC4"] = list(Decoys4(), "") + ",::ffff:" + Decoys4().front().address;
    vars["OARBANK_PROBE_NONPUBLIC6"] = list(Decoys6(), "") + "," + kHost6 + "," + kHostPublic6;
    vars["OARBANK_PROBE_HOST_ADDRESSES"] = std::string(kHost4) + "," + kHostPublic4 + "," + kStackGateway4;
  }

  // A crossrun_* probe's first run (cross_run.h), in a fresh layout of its
  // own: it must say "planted". Sets `vars` and `second_policy` for the
  // second run, the one judged; returns why not where it could not plant.
  template <typename SpawnFn>
  std::optional<std::string> PlantFirst(const std::string& probe, const std::string& policy_path, bool runner,
                                        std::map<std::string, std::string>& vars, std::string& second_policy,
                                        ProbeRun& first, SpawnFn spawn) {
    const std::string id = probe + "-" + std::to_string(++run_number_);
    auto layout = MakeCrossRunLayout(world_.root, policy_path, id, runner);
    if (!layout.ok()) return layout.error().where + ": " + layout.error().what;
    vars["OARBANK_PROBE_GRANT"] = layout.value().grant;
    vars["OARBANK_PROBE_ELSEWHERE"] = layout.value().elsewhere;
    vars["OARBANK_PROBE_RUN"] = "1";
    first = spawn(layout.value().first_policy, vars);
    if (first.verdict != "planted")
      return "the first run could not plant what the second should meet: " + first.Summary() + " " + first.detail +
             first.stderr_text;
    vars["OARBANK_PROBE_RUN"] = "2";
    second_policy = layout.value().second_policy;
    return std::nullopt;
  }

  // 1. Unconfined, as root, with the agent's full environment: the probe
  //    must escape (or say its route does not exist on this kernel).
  Cell RunUnconfined(const std::string& probe, SignalSinks& sinks) {
    std::string outside_dir;
    auto vars = Prepare(probe, 0, world_.work, outside_dir, sinks);
    vars["OARBANK_PROBE_WRITABLE_GRANTS"] = world_.work + ":" + world_.data + ":" + world_.work + "/tmp";
    vars["OARBANK_PROBE_RUNTIME"] = world_.runtime;
    const std::vector<std::string> agent_env = {"PATH=/usr/bin:/bin", "OARBANK_AGENT_TOKEN=" + world_.env_secret};
    auto spawn = [&](const std::string&, const std::map<std::string, std::string>& v) {
      std::vector<std::string> env = agent_env;
      for (const auto& [k, value] : v) env.push_back(k + "=" + value);
      return SpawnProbe({world_.bundle + "/" + probe}, env, 0, kTimeoutMs);
    };
    if (IsCrossRunProbe(probe)) {
      std::string second_policy;
      ProbeRun first;
      if (auto why = PlantFirst(probe, policy_paths_.front(), true, vars, second_policy, first, spawn))
        return Cell{probe, "unconfined", 0, "escaped", ProbeRun{}, Outcome::kBroken, *why};
    }
    auto held = HoldCarveOut(probe, false);
    Cell cell{probe, "unconfined", 0, "escaped", spawn("", vars), Outcome::kPass, ""};
    held = {};
    // What it reached unconfined is no evidence against a confined run.
    ResolveSent(cell.run, sinks, 0, world_.listeners->Take(probe));
    // A daemon it started must be seen alive from outside: the check that
    // judges its confined runs is proven here.
    const std::string pidfile = vars["OARBANK_PROBE_PIDFILE"];
    std::vector<std::string> daemons;
    ReapDaemon(pidfile, daemons);
    if (cell.run.verdict == "unsupported") {
      cell.outcome = Outcome::kUnsupported;
      cell.why = cell.run.detail;
    } else if (cell.run.verdict != "escaped") {
      cell.outcome = Outcome::kBroken;
      cell.why = "unconfined it did not escape: " + cell.run.Summary() + " " + cell.run.detail;
    } else if (access(pidfile.c_str(), F_OK) == 0 && daemons.empty()) {
      cell.outcome = Outcome::kBroken;
      cell.why = "unconfined its daemon was not seen alive from outside (no lock on " + pidfile + ")";
    }
    return cell;
  }

  // The cage alone (sandbox-exec), or the supervisor around it for what only
  // a job's containment stops and for what only a job has (its own devpts
  // and /dev/shm: the probes named job_*). Both launchers build the
  // module's environment (environment.h) and are given the probe's
  // variables.
  std::vector<std::string> ConfinedArgv(const std::string& probe, size_t policy_index, const std::string& policy_path,
                                        bool supervised, const std::map<std::string, std::string>& vars) const {
    const bool cage = IsCageRun(probe, result_.policies[policy_index]);
    std::vector<std::string> argv = {o_.agent, cage ? "cage" : supervised ? "run" : "sandbox-exec"};
    if (o_.abi_cap >= 0) argv.insert(argv.end(), {"--landlock-abi-max", std::to_string(o_.abi_cap)});
    if (cage) {
      argv.insert(argv.end(), {"--unproven", "--timeout", std::to_string(kTimeoutMs / 1000), "--worktree",
                               vars.at("OARBANK_PROBE_GRANT"), "--writable", "--read", world_.bundle});
      for (const auto& [k, v] : vars) argv.push_back("--env=" + k + "=" + v);
      argv.insert(argv.end(), {"--", world_.bundle + "/" + probe});
      return argv;
    }
    // The battery is what proves a class: its own jobs run unproven.
    if (supervised) argv.insert(argv.end(), {"--unproven", "--timeout", std::to_string(kTimeoutMs / 1000)});
    // The job's own devpts and /dev/shm are granted under `run`
    // (dev_beyond_granted leaves them to the job_* probes).
    if (supervised) argv.push_back("--env=OARBANK_PROBE_SUPERVISED=1");
    // The network world's public hosts are public to the job (a test range
    // inside 198.18.0.0/15; every other address keeps its class).
    if (world_.net && policies_[policy_index].net().mode == NetMode::kEgressAny)
      argv.insert(argv.end(), {"--egress-test-public-range", kPublicRange});
    for (const auto& [k, v] : vars) argv.push_back("--env=" + k + "=" + v);
    argv.insert(argv.end(), {policy_path, "--", world_.bundle + "/" + probe});
    return argv;
  }

  // 2. Confined: the policy, the identity, the environment the agent builds.
  //    `last` is the worker's latest observation of the world, which stands
  //    for the next run's "before" of the shared directories (ObserveWorld).
  Cell RunConfined(const std::string& probe, size_t policy_index, uid_t uid, std::optional<Evidence>& last,
                   SignalSinks& sinks, const std::string& entry) {
    const Policy& policy = policies_[policy_index];
    const std::string& name = result_.policies[policy_index];
    std::string outside_dir;
    auto vars = Prepare(probe, uid, policy.work() ? world_.work : world_.data, outside_dir, sinks);
    vars["OARBANK_PROBE_WRITABLE_GRANTS"] = WritableGrants(policy);
    vars["OARBANK_PROBE_RUNTIME"] = policy.runtime().value_or(world_.runtime);
    // The agent's own environment, which holds its secret.
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "OARBANK_AGENT_TOKEN=" + world_.env_secret};
    env.insert(env.end(), o_.agent_env.begin(), o_.agent_env.end());
    const bool supervised = entry != "sandbox-exec";
    if (supervised) vars["OARBANK_PROBE_INIT_PID"] = "1";
    const Expectation* row = table_.Find(probe, name, result_.abi, supervised ? "run" : "sandbox-exec");
    const bool egress_any = policy.net().mode == NetMode::kEgressAny;
    // Enforced here, but the world has no public host to prove it with: not
    // run, and no verdict, so the class is not proven (the notes say why).
    if (egress_any && egress_any_unenforceable_.empty() && !world_.net)
      return Cell{probe,
                  name,
                  uid,
                  "not run",
                  ProbeRun{},
                  Outcome::kUnsupported,
                  "not run: the battery's network world could not be built (see the notes): egress-any is not "
                  "proven here",
                  entry};
    std::string policy_path = policy_paths_[policy_index];
    // A crossrun_* probe's first run refused as not enforceable here (below
    // the policy's Landlock ABI, egress-any without its job network) is the
    // cell's run: the second would be refused the same way.
    std::optional<ProbeRun> refused_first;
    if (IsCrossRunProbe(probe)) {
      auto spawn = [&](const std::string& path, const std::map<std::string, std::string>& v) {
        return SpawnProbe(ConfinedArgv(probe, policy_index, path, supervised, v), env, uid, kTimeoutMs);
      };
      ProbeRun first;
      if (auto why = PlantFirst(probe, policy_paths_[policy_index], policy.work().has_value(), vars, policy_path, first,
                                spawn)) {
        if (first.exit_code != kExitNotEnforced || !first.verdict.empty())
          return Cell{probe, name, uid, "planted", first, Outcome::kUnexpected, *why, entry};
        refused_first = first;
      }
    }
    const auto argv = ConfinedArgv(probe, policy_index, policy_path, supervised, vars);
    const Evidence before = ObserveWorld(world_, outside_dir, probe, last ? &*last : nullptr);
    auto held = HoldCarveOut(probe, !policy.read_only().empty());
    Cell cell{probe,          name, uid,  "", refused_first ? *refused_first : SpawnProbe(argv, env, uid, kTimeoutMs),
              Outcome::kPass, "",   entry};
    held = {};
    // `run` exits 128+N for a job killed by signal N; a probe that dies
    // prints no verdict.
    if (supervised && cell.run.verdict.empty() && cell.run.exit_code > 128 && cell.run.exit_code <= 128 + 64) {
      cell.run.signal = cell.run.exit_code - 128;
      cell.run.exit_code = -1;
    }
    last = ObserveWorld(world_, outside_dir, probe);
    ResolveSent(cell.run, sinks, uid, last->arrivals);
    std::vector<std::string> evidence = CompareEvidence(before, *last, probe);
    ReapDaemon(vars["OARBANK_PROBE_PIDFILE"], evidence);
    Judge(cell, row, table_.PolicyMinAbi(name), result_.abi, evidence, egress_any ? egress_any_unenforceable_ : "");
    return cell;
  }

  const BatteryOptions& o_;
  const Expectations& table_;
  World& world_;
  BatteryResult& result_;
  const AgentFacts agent_;
  const std::string& egress_any_unenforceable_;
  std::vector<std::string> policy_paths_;  // in the world, one per result_.policies
  std::vector<Policy> policies_;
  std::vector<std::vector<Cell>> per_probe_;  // each probe's confined cells, in order
  std::atomic<int> run_number_{0};
  std::atomic<size_t> next_{0};
  // rename_read_only_carve_out exchanges the world's carved directory with a
  // twin and back where nothing carves it out (unconfined, and under a
  // policy without read_only: its positive control). A launcher binding
  // that carve-out at the same moment would find another directory there
  // and refuse. Those runs hold the carve-out alone; every run under a
  // policy that carves it out holds it beside the others.
  std::shared_mutex carve_out_;
  std::pair<std::unique_lock<std::shared_mutex>, std::shared_lock<std::shared_mutex>> HoldCarveOut(
      const std::string& probe, bool policy_carves) {
    std::unique_lock<std::shared_mutex> alone(carve_out_, std::defer_lock);
    std::shared_lock<std::shared_mutex> beside(carve_out_, std::defer_lock);
    if (probe == "rename_read_only_carve_out" && !policy_carves)
      alone.lock();
    else if (policy_carves)
      beside.lock();
    return {std::move(alone), std::move(beside)};
  }
};

}  // namespace

Expected<BatteryResult> RunBattery(const BatteryOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  BatteryResult result;
  result.host = ProbeHost(o.abi_cap, {.landlock_whiteout = true});
  result.abi = result.host.landlock_abi;
  result.uids = o.uids;

  auto table = Expectations::Load(o.expectations);
  if (!table.ok()) return table.error();
  result.mutation = MutationScore(o.mutation);
  if (!o.catalogue.empty()) {
    auto catalogue = LoadCatalogue(o.catalogue);
    if (!catalogue.ok()) return catalogue.error();
    result.catalogue = std::move(catalogue.value());
  }
  if (auto error = SelectProbesAndPolicies(o, result)) return *error;
  AgentFacts agent = AskAgent(o.agent, o.agent_env);
  auto world = MakeWorld(o.probe_dir, o.uids, agent.egress_any_unenforceable.empty());
  if (!world.ok()) return world.error();
  result.notes = world.value()->notes;
  if (!agent.egress_any_unenforceable.empty())
    result.notes.push_back(agent.egress_any_unenforceable +
                           ": the egress-any policies' runs must be refused, and the egress probes, "
                           "with no public test host, say unsupported");
  if (agent.landlock_abi >= 0 && agent.landlock_abi < result.abi) {
    // The launcher decides the ABI (a kernel that reports one without all of
    // its features is used at the ABI below): its policies are judged there.
    result.notes.push_back("the agent uses Landlock ABI " + std::to_string(agent.landlock_abi) + ", not " +
                           std::to_string(result.abi) +
                           (agent.landlock_missing.empty() ? "" : ": the kernel lacks " + agent.landlock_missing));
    result.abi = result.host.landlock_abi = agent.landlock_abi;
    result.host.landlock_missing = agent.landlock_missing;
  }
  if (agent.syscall_table_end < 0)
    result.notes.push_back("sandbox-report named no syscall table: syscall_above_table has nothing to try");

  BatteryRun run(o, table.value(), *world.value(), result, std::move(agent));
  if (auto error = run.LoadPolicies()) return *error;
  run.RunAll();
  run.KillLeftovers();

  result.passed = true;
  for (const auto& c : result.unconfined) result.passed &= !IsFailure(c.outcome);
  for (const auto& c : result.confined) result.passed &= !IsFailure(c.outcome);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace oarbank

namespace oarbank {

std::vector<std::string> ProvenClasses(const BatteryResult& result) {
  std::vector<std::string> proven;
  for (const auto& c : result.unconfined)
    if (IsFailure(c.outcome)) return proven;
  for (size_t p = 0; p < result.policies.size(); ++p) {
    bool ok = true, ran = false;
    for (const auto& c : result.confined) {
      if (c.policy != result.policies[p]) continue;
      ok &= !IsFailure(c.outcome);
      ran |= !c.run.verdict.empty() || c.run.signal != 0;
    }
    if (ok && ran) proven.push_back(result.policy_classes[p]);
  }
  return proven;
}

}  // namespace oarbank
