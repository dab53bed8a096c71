#include "sandbox/supervise/supervisor.h"

#include "sandbox/host/root_etc.h"
#include "sandbox/launch/git_history.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "sandbox/common/exit_codes.h"
#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/common/path_within.h"
#include "sandbox/common/text_encoding.h"
#include "sandbox/launch/broker_handoff.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/launch/job_devices.h"
#include "sandbox/plan/attestation.h"
#include "sandbox/plan/capabilities.h"
#include "sandbox/plan/plan.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/environment.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/job_network.h"
#include "sandbox/supervise/job_plan.h"
#include "sandbox/supervise/job_processes.h"
#include "sandbox/supervise/job_state.h"
#include "sandbox/supervise/namespaces.h"

namespace oarbank::cage {
namespace {

std::once_flag g_collect_once;

}  // namespace

Job::Job(std::unique_ptr<State> state) : state_(std::move(state)) {}
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&&) noexcept = default;
Job::~Job() {
  if (state_ && state_->phase != Phase::kDone) {
    state_->Abort();
    state_->Finish();
  }
}

bool Job::refused() const { return state_->result.refused(); }

std::string Job::Freeze() {
  if (!state_->leaf) return "cgroup.freeze unavailable: " + state_->result.container.cgroup_detail;
  if (state_->phase == Phase::kDone) return "the job has ended";
  if (int err = state_->leaf->Freeze(true)) return "cgroup.freeze" + ErrnoText(err);
  return "";
}

std::string Job::Thaw() {
  if (!state_->leaf) return "cgroup.freeze unavailable: " + state_->result.container.cgroup_detail;
  if (state_->phase == Phase::kDone) return "the job has ended";
  if (int err = state_->leaf->Freeze(false)) return "cgroup.freeze" + ErrnoText(err);
  return "";
}

Result Job::Wait() { return state_->Finish(); }

// The proof a job runs under ("proven (...)" or "unproven (operator
// override)"), or why it may not run.
static oarbank::Expected<std::string> CheckProof(const Policy& policy, const HostFacts& host,
                                                 const RunOptions& options) {
  if (options.unproven) return std::string("unproven (operator override)");
  const std::string path = options.attestation_path.empty() ? AttestationPath() : options.attestation_path;
  const Attestation attestation = ReadAttestationForThisProcess(path, host);
  if (std::string gap = ProofGap(attestation, policy); !gap.empty())
    return Error{"battery.proven", "sandbox: CAPABILITY_NOT_ENFORCED: " + gap};
  return "proven (" + path + ")";
}

namespace {

// Ends a job before anything was spawned: refused, with `reason`.
void RefuseBeforeSpawn(Job::State& s, const std::string& reason) {
  s.result.fault = Fault::kRefused;
  s.result.reason = reason;
  s.result.seconds = std::chrono::duration<double>(Clock::now() - s.start).count();
  s.phase = Phase::kDone;
}

// The caps, streams and terminal the options ask for.
void TakeOptions(Job::State& s, const RunOptions& options) {
  s.start = Clock::now();
  if (options.timeout.count() > 0) s.deadline = s.start + options.timeout;
  s.out_cap.max = options.stdout_max;
  s.err_cap.max = options.stderr_max;
  s.out_cap.spool = options.stdout_fd;
  s.err_cap.spool = options.stderr_fd;
  s.out_stream.fd = options.stream_stdout_fd;
  s.err_stream.fd = options.stream_stderr_fd;
  s.want_pty = options.pty;
  s.terminal = options.pty ? options.terminal_fd : -1;
}

// The plan's container facts in the result, and the gate's expectations in
// the job's state.
void TakePlan(Job::State& s, const JobPlan& plan) {
  Container& box = s.result.container;
  box.namespaces = plan.namespaces.Names();
  box.net = plan.namespaces.net_detail;
  box.limits = DescribeLeafLimits(plan.limits);
  box.cgroup_detail = plan.cgroup.detail;
  s.gate_wants = plan.gate;
}

// The process container's cgroup leaf, where the agent's cgroup is
// delegated: named here and made by the keeper (KeeperMain).
std::optional<std::string> PrepareLeaf(Job::State& s, const JobPlan& plan, const HostFacts& host) {
  if (!plan.cgroup.usable) return std::nullopt;
  std::call_once(g_collect_once, [&] { CollectStaleLeaves(plan.cgroup.base); });
  auto leaf = CgroupLeaf::Prepare(plan.cgroup, plan.limits);
  if (!leaf.ok()) return leaf.error().where + ": " + leaf.error().what;
  s.leaf = std::move(leaf).value();
  s.result.container.cgroup = s.leaf->path();
  s.gate_wants.cgroup_line = CgroupProcLine(host.cgroup, s.leaf->path());
  return std::nullopt;
}

// The strings ChildPlan's argv and envp point into: they outlive the fork.
struct ChildStrings {
  std::vector<std::string> args, env;
};

// The job's egress proxy's refusals join its explanation (job_trace.h);
// every line still goes where it went.
void TraceProxyRefusals(Job::State& s, const std::shared_ptr<JobTrace>& trace) {
  std::function<void(const std::string&)> previous = s.egress_options.log;
  s.egress_options.log = [trace, previous](const std::string& line) {
    if (line.find("\"egress_refused\"") != std::string::npos) {
      std::lock_guard lock(trace->mu);
      if (trace->proxy_refusals.size() < kMaxProxyRefusals)
        trace->proxy_refusals.push_back(line);
      else
        ++trace->proxy_dropped;
    }
    if (previous) {
      previous(line);
    } else {
      fprintf(stderr, "%s\n", line.c_str());
      fflush(stderr);
    }
  };
}

// Everything the job's processes need, built now: after the fork they
// allocate nothing. The broker grant (broker_handoff.h): below Landlock
// ABI 9 the job holds one connection, made here in the agent's namespaces
// (`broker`, the job's kJobBrokerFd).
std::optional<std::string> PrepareChild(ChildPlan& cp, ChildStrings& strings, UniqueFd& broker, Job::State& s,
                                        const JobPlan& job, const HostFacts& host, const Policy& policy,
                                        const std::vector<std::string>& argv, const RunOptions& options,
                                        const JobHooks& hooks) {
  const Plan& plan = job.confinement;
  const NamespacePlan& ns = job.namespaces;
  cp.plan = &plan;
  cp.clone_flags = ns.clone_flags;
  for (const auto& [name, flag] : {std::pair{"namespace-pid", CLONE_NEWPID},
                                   {"namespace-ipc", CLONE_NEWIPC},
                                   {"namespace-uts", CLONE_NEWUTS},
                                   {"namespace-net", CLONE_NEWNET}})
    if (FaultSkipStep(name)) cp.clone_flags &= ~flag;  // test-only build (common/fault_hooks.h)
  cp.maps = job.id_maps;
  cp.leaf = s.leaf ? &*s.leaf : nullptr;
  cp.root_etc_idmap_fd = host.etc_view.idmap ? host.etc_view.idmap->get() : -1;
  if (plan.root_etc_view && !options.run_as_uid && host.etc_view.proof_tree)
    cp.root_etc_tree_fd = host.etc_view.proof_tree->get();
  strings.args = argv;
  for (auto& a : strings.args) cp.argv.push_back(a.data());
  cp.argv.push_back(nullptr);
  std::map<std::string, std::string> named_env = options.env;
  if (plan.broker == BrokerHandoff::kInheritedFd) {
    auto connected = ConnectBroker(*policy.broker());
    if (!connected.ok()) return connected.error().where + ": " + connected.error().what;
    broker.Reset(connected.value());
  }
  if (plan.broker != BrokerHandoff::kNone)
    named_env["OARBANK_BROKER"] = BrokerEnvironmentValue(plan.broker, *policy.broker(), kJobBrokerFd);
  strings.env = BuildModuleEnvironment(policy, named_env);
  for (auto& e : strings.env) cp.envp.push_back(e.data());
  cp.envp.push_back(nullptr);
  if (options.cwd) {
    cp.cwd = *options.cwd;
  } else {
    char cwd[4096];
    cp.cwd = getcwd(cwd, sizeof cwd) ? cwd : "/";
  }
  cp.run_as_uid = options.run_as_uid;
  cp.run_as_gid = options.run_as_gid;
  cp.supervisor = getpid();
  cp.ignored_signals = IgnoredSignals();
  cp.pty = options.pty;
  cp.loopback_up = policy.ipc() == IpcMode::kJob;
  cp.init_not_dumpable = policy.debug();
  s.publish_netns = options.publish_netns;
  if (ns.job_network) {
    s.job_network = true;
    if (hooks.egress) s.network_settings.test_public = hooks.egress->test_public;
  }
  if (ns.egress_listener) {
    cp.egress_port = policy.net().proxy_port;
    s.egress_allow = policy.net().allow;
    if (hooks.egress) s.egress_options = *hooks.egress;
  }
  if (hooks.trace) {
    s.trace = hooks.trace;
    TraceProxyRefusals(s, hooks.trace);
  }
  return std::nullopt;
}

// The channels between the supervisor and the job's processes, each end
// owned until it is handed over: a failure anywhere closes every one.
struct JobChannels {
  // The job's ends, closed in the supervisor right after the fork.
  UniqueFd devnull, status_w, out_w, err_w, sync_r, sync_w, gate_child, egress_child, net_child, stdin_r, broker,
      trace_r;
  // The supervisor's ends, handed to the job's state (trace_w: the
  // supervisor's own, written once the tracer is attached).
  UniqueFd status, out, err, gate, egress, net, stdin_w, trace_w;

  // The numbers the job's processes use (the numbers survive the forks).
  JobFds ChildFds() const {
    JobFds f;
    f.devnull = devnull.get();
    f.status_w = status_w.get();
    f.out_w = out_w.get();
    f.err_w = err_w.get();
    f.sync_r = sync_r.get();
    f.sync_w = sync_w.get();
    f.gate_child = gate_child.get();
    f.egress_child = egress_child.get();
    f.net_child = net_child.get();
    f.stdin_r = stdin_r.get();
    f.broker = broker.get();
    f.trace_r = trace_r.get();
    return f;
  }
  void CloseChildEnds() {
    for (UniqueFd* fd : {&devnull, &status_w, &out_w, &err_w, &sync_r, &sync_w, &gate_child, &egress_child, &net_child,
                         &stdin_r, &broker, &trace_r})
      fd->Reset();
  }
};

int Pipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errno;
  read_end.Reset(p[0]);
  write_end.Reset(p[1]);
  return 0;
}

int SeqPacketPair(UniqueFd& mine, UniqueFd& theirs) {
  int p[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) != 0) return errno;
  mine.Reset(p[0]);
  theirs.Reset(p[1]);
  return 0;
}

// Opens every channel the job needs; 0 or the errno of the first that
// failed (what was opened closes with `c`). The caller's input goes to the
// job through a pipe of its own (or the terminal): the job never holds the
// caller's fd, a terminal least of all.
int OpenChannels(JobChannels& c, const NamespacePlan& ns, bool stdin_relay, bool traced) {
  const int one = 1;
  c.devnull.Reset(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!c.devnull.valid()) return errno;
  if (int err = Pipe(c.status, c.status_w)) return err;
  if (int err = Pipe(c.out, c.out_w)) return err;
  if (int err = Pipe(c.err, c.err_w)) return err;
  if (int err = Pipe(c.sync_r, c.sync_w)) return err;
  if (int err = SeqPacketPair(c.gate, c.gate_child)) return err;
  if (setsockopt(c.gate.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0) return errno;
  if (ns.egress_listener)
    if (int err = SeqPacketPair(c.egress, c.egress_child)) return err;
  if (ns.job_network)
    if (int err = SeqPacketPair(c.net, c.net_child)) return err;
  if (stdin_relay)
    if (int err = Pipe(c.stdin_r, c.stdin_w)) return err;
  if (traced)
    if (int err = Pipe(c.trace_r, c.trace_w)) return err;
  return 0;
}

// The supervisor's ends go to the job's state, which closes them; poll
// says when to read, and a read never blocks the supervisor (the module
// could not drain its output while it did).
void HandOver(Job::State& s, JobChannels& c, const RunOptions& options, bool stdin_relay) {
  s.status = std::move(c.status);
  s.out = std::move(c.out);
  s.err = std::move(c.err);
  s.gate = std::move(c.gate);
  s.egress = std::move(c.egress);
  s.net = std::move(c.net);
  s.stdin_w = std::move(c.stdin_w);
  s.to_job.fd = s.stdin_w.get();  // the pty, once the launcher sends it
  s.in_src = options.stdin_fd >= 0 && (stdin_relay || options.pty) ? options.stdin_fd : -1;
  for (const UniqueFd* fd : {&s.stdin_w, &s.status, &s.out, &s.err})
    if (fd->valid()) fcntl(fd->get(), F_SETFL, fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
}

// --explain: the tracer attaches to the keeper, which waits on `go` until
// then (job_trace.h). False with the job refused when it does not: the
// keeper reads EOF and ends.
bool AttachTracer(Job::State& s, UniqueFd& go) {
  auto tracer = JobTracer::Attach(*s.trace, s.keeper, std::chrono::seconds(10));
  if (!tracer.ok()) {
    go.Reset();
    s.Refuse(tracer.error().where + ": " + tracer.error().what);
    return false;
  }
  s.tracer.emplace(std::move(tracer).value());
  const char t = 'T';
  if (write(go.get(), &t, 1) != 1) {
    go.Reset();
    s.Refuse("explain: cannot release the traced keeper" + ErrnoText(errno));
    return false;
  }
  go.Reset();
  return true;
}

// Forks the keeper, closes the job's ends here, and pumps up to the exec
// (or the refusal): the gate is verified in there.
void Launch(Job::State& s, const ChildPlan& cp, JobChannels& c) {
  const JobFds f = c.ChildFds();
  FaultPause("supervisor-before-keeper");
  s.keeper = fork();
  if (s.keeper == 0) KeeperMain(cp, f);
  const int fork_err = errno;
  FaultPause("supervisor-after-keeper", s.keeper);
  c.CloseChildEnds();
  if (s.keeper < 0) {
    s.keeper = -1;
    s.Refuse("job-setup: fork" + ErrnoText(fork_err));
    s.Finish();
    return;
  }
  if (s.trace && !AttachTracer(s, c.trace_w)) {
    s.Finish();
    return;
  }
  if (s.job_network) {
    s.PrepareJobNetwork();
    if (s.result.fault == Fault::kRefused) {
      s.Finish();
      return;
    }
  }
  s.Pump([&s] { return s.phase != Phase::kAwaitReady && s.phase != Phase::kAwaitExec; });
  if (s.result.fault == Fault::kRefused || s.phase == Phase::kAwaitReady || s.phase == Phase::kAwaitExec) {
    if (s.result.fault != Fault::kRefused) s.Refuse("gate: the job ended during setup");
    s.Finish();
  }
}

}  // namespace

Job Start(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options,
          const JobHooks& hooks) {
  auto state = std::make_unique<Job::State>();
  Job::State& s = *state;
  auto refuse = [&](const std::string& reason) {
    RefuseBeforeSpawn(s, reason);
    return Job(std::move(state));
  };
  TakeOptions(s, options);
  if (argv.empty()) return refuse("argv: empty");
  const HostFacts host = ProbeSupervisedHost(
      options.landlock_abi_max,
      policy.net().mode == NetMode::kEgressAny ? JobNetworkProbeDepth::kParts : JobNetworkProbeDepth::kNone,
      SupervisedProbeScope(policy));
  JobPlan plan = PlanSupervisedJob(policy, host, options);
  TakePlan(s, plan);
  if (hooks.trace) hooks.trace->plan = plan.confinement;
  FaultMutatePlan(plan.confinement);  // test-only build: the gate still expects the plan as made
  if (!plan.refusal.empty()) return refuse(plan.refusal);
  auto proof = CheckProof(policy, host, options);
  if (!proof.ok()) return refuse(proof.error().what);
  s.result.container.proof = proof.value();
  if (auto why = PrepareLeaf(s, plan, host)) return refuse(*why);

  // From here a failure removes the leaf it named.
  auto refuse_after_leaf = [&](const std::string& reason) {
    if (s.leaf) s.leaf->Remove();
    return refuse(reason);
  };
  ChildPlan cp;
  ChildStrings strings;
  JobChannels channels;
  if (auto why = PrepareChild(cp, strings, channels.broker, s, plan, host, policy, argv, options, hooks))
    return refuse_after_leaf(*why);
  const bool stdin_relay = options.stdin_fd >= 0 && !options.pty;
  if (int err = OpenChannels(channels, plan.namespaces, stdin_relay, hooks.trace != nullptr))
    return refuse_after_leaf("job-setup: pipes" + ErrnoText(err));
  HandOver(s, channels, options, stdin_relay);
  Launch(s, cp, channels);
  return Job(std::move(state));
}

Result RunPolicy(const Policy& policy, const std::vector<std::string>& argv, const RunOptions& options,
                 const JobHooks& hooks) {
  return Start(policy, argv, options, hooks).Wait();
}

namespace {

// A Spec path as the policy will read it (common/grant_path.h: only the
// system's own links followed), or itself when it cannot be resolved so
// (ParsePolicy then names it).
std::string Canonical(const std::string& path) {
  auto resolved = ResolveGrantPath(path);
  return resolved.ok() ? resolved.value().path : path;
}

// The worktree's history: each path inside a writable directory becomes a
// read_only carve-out (appended to `read_only`); those outside every one
// are returned, to be granted read-only. A directory the caller named
// writable itself stays writable. (With a read-only worktree `writable`
// holds only the scratch and state: the history inside the worktree is
// read-only already, and granting it again is harmless.)
nlohmann::json PlaceHistory(const GitCarveOuts& git, const std::vector<std::string>& writable,
                            nlohmann::json& read_only) {
  nlohmann::json outside = nlohmann::json::array();
  for (const auto& path : git.Paths()) {
    if (std::find(writable.begin(), writable.end(), path) != writable.end()) continue;
    const bool inside =
        std::any_of(writable.begin(), writable.end(), [&](const std::string& w) { return IsAtOrBelow(path, w); });
    (inside ? read_only : outside).push_back(path);
  }
  return outside;
}

}  // namespace

oarbank::Expected<Policy> PolicyForSpec(const Spec& spec) {
  const bool writable_worktree = !spec.worktree.empty() && spec.worktree_writable;
  const bool exec_writable = spec.exec_writable.value_or(writable_worktree);
  nlohmann::json doc = {{"contract", 1},
                        {"role", "runner"},
                        {"net", {{"mode", spec.egress_any ? "egress-any" : "none"}}},
                        {"exec_writable", exec_writable}};
  if (spec.job_sockets && !spec.egress_any) doc["ipc"] = "job";
  if (spec.debug) doc["debug"] = true;
  if (!spec.allow.empty()) {
    // An allowlist narrows what egress-any would give: asking for both is a mistake, never the wider one.
    if (spec.egress_any) return Error{"allow", "an allowlist and egress_any exclude each other"};
    doc["net"] = {{"mode", "egress-allowlist"}, {"allow", spec.allow}, {"proxy_port", kCageProxyPort}};
  }
  // Spec field for each policy field, so an error names what the caller wrote.
  std::map<std::string, std::string> origin{{"net.allow", "allow"}, {"state", "state_dirs"}};
  std::vector<std::string> writable;  // canonical, for placing the history
  if (writable_worktree) {
    doc["work"] = spec.worktree;
    origin["work"] = "worktree";
    writable.push_back(Canonical(spec.worktree));
    if (!spec.scratch.empty()) {
      doc["data"] = spec.scratch;
      origin["data"] = "scratch";
    }
    // A runner names a bundle; the base system's /usr stands in and grants
    // nothing new.
    doc["bundle"] = "/usr";
  } else {
    doc["bundle"] = spec.worktree.empty() ? "/usr" : spec.worktree;
    origin["bundle"] = "worktree";
    if (!spec.scratch.empty()) {
      doc["work"] = spec.scratch;
      origin["work"] = "scratch";
    }
  }
  if (!spec.scratch.empty()) writable.push_back(Canonical(spec.scratch));
  if (!spec.state_dirs.empty()) doc["state"] = spec.state_dirs;
  for (const auto& dir : spec.state_dirs) writable.push_back(Canonical(dir));
  nlohmann::json read_only = spec.read_only;
  nlohmann::json tools = nlohmann::json::array();
  std::vector<std::string> tool_origin;  // tools[i] came from this Spec field
  for (const auto& [field, paths] : {std::pair{"read_dirs", &spec.read_dirs}, {"read_files", &spec.read_files}}) {
    if (paths->empty()) continue;
    tools.push_back({{"id", field}, {"paths", *paths}});
    tool_origin.push_back(field);
  }
  if (!spec.git_dir.empty() && spec.worktree.empty()) return Error{"git_dir", "needs a worktree"};
  const auto worktree = spec.worktree.empty() ? Expected<ResolvedPath>(Error{}) : ResolveGrantPath(spec.worktree);
  if (worktree.ok() && worktree.value().type == S_IFDIR) {
    auto git = ResolveGitCarveOuts(worktree.value().path, spec.git_dir);
    if (!git.ok()) return Error{kGitCarveOutField, git.error().where + ": " + git.error().what};
    if (git.value()) {
      const nlohmann::json outside = PlaceHistory(*git.value(), writable, read_only);
      if (!outside.empty()) {
        tools.push_back({{"id", "git"}, {"paths", outside}});
        tool_origin.push_back(kGitCarveOutField);
      }
    }
  }
  if (!tools.empty()) doc["tools"] = tools;
  if (!read_only.empty()) doc["read_only"] = read_only;
  auto policy = ParsePolicy(doc.dump());
  if (policy.ok()) return policy;
  Error e = policy.error();
  for (const auto& [field, from] : origin)
    if (e.where == field || e.where.rfind(field + "[", 0) == 0) e.where = from + e.where.substr(field.size());
  for (size_t i = 0; i < tool_origin.size(); ++i) {
    const std::string prefix = "tools[" + std::to_string(i) + "].paths";
    if (e.where.rfind(prefix, 0) == 0) e.where = tool_origin[i] + e.where.substr(prefix.size());
  }
  if (e.where.rfind("read_only[", 0) == 0 && std::stoul(e.where.substr(10)) >= spec.read_only.size())
    e.where = kGitCarveOutField;
  return e;
}

Result RunSpec(const Spec& spec, const RunOptions& options, const JobHooks& hooks) {
  auto policy = PolicyForSpec(spec);
  if (!policy.ok()) {
    Result r;
    r.fault = Fault::kRefused;
    r.reason = PolicyErrorLine(policy.error());
    return r;
  }
  RunOptions o = options;
  o.abi_floor = std::max(o.abi_floor, spec.abi_floor);
  if (!spec.scratch.empty()) {
    o.env.emplace("HOME", spec.scratch);
    o.env.emplace("TMPDIR", spec.scratch);
  }
  if (!o.cwd) o.cwd = spec.worktree.empty() ? (spec.scratch.empty() ? "/" : spec.scratch) : spec.worktree;
  return RunPolicy(policy.value(), spec.argv, o, hooks);
}

Result Run(const Spec& spec, const RunOptions& options) { return RunSpec(spec, options, JobHooks{}); }

Result Run(const Spec& spec) { return Run(spec, RunOptions{}); }

Availability AssessAvailability(const HostFacts& host, bool namespaces_ok, const std::string& namespaces_detail) {
  Availability a;
  std::vector<std::string> why;
  // The baseline every job has: no grants beyond a read-only bundle, net
  // none, nothing written executable.
  auto baseline = ParsePolicy(R"({"contract": 1, "role": "probe", "bundle": "/usr"})");
  if (!baseline.ok()) {
    why.push_back(PolicyErrorLine(baseline.error()));
  } else {
    const Placement placement = Place(baseline.value(), host);
    if (placement.verdict != Verdict::kOk) why.push_back(PlacementLine(placement));
  }
  if (!host.user_namespaces)
    why.push_back("user namespaces: " + host.user_namespaces_detail);
  else if (!namespaces_ok)
    why.push_back("namespaces: " + namespaces_detail);
  a.available = why.empty();
  for (const auto& w : why) a.reason += (a.reason.empty() ? "" : "; ") + w;
  return a;
}

Availability CheckAvailability() {
  const HostFacts host = ProbeHost();
  const NamespaceProbe& ns = ProbeJobNamespaces();
  Availability a = AssessAvailability(host, ns.ok, ns.detail);
  const Attestation attestation = ReadAttestationForThisProcess(AttestationPath(), host);
  a.attested = attestation.present;
  a.proven_classes = attestation.proven_classes;
  a.proof_detail = attestation.detail;
  return a;
}

bool Available() {
  const Availability a = CheckAvailability();
  if (!a.available) return false;
  auto policy = PolicyForSpec(Spec{});
  return policy.ok() && std::find(a.proven_classes.begin(), a.proven_classes.end(), PolicyClass(policy.value())) !=
                            a.proven_classes.end();
}

nlohmann::ordered_json ResultReport(const Result& r) {
  const GateReading& v = r.container.verified;
  // Output that is not UTF-8 (binary, or a character cut at the cap) goes
  // as base64, byte for byte; the encoding field says which.
  auto text = [](const std::string& s) { return IsUtf8(s) ? s : Base64(s); };
  auto encoding = [](const std::string& s) { return IsUtf8(s) ? "utf-8" : "base64"; };
  return {
      {"format", kRunFormat},
      {"exit_code", r.exit_code},
      {"signal", r.signal},
      {"refused", r.refused()},
      {"fault", FaultName(r.fault)},
      {"reason", r.reason},
      {"stdout", text(r.stdout_text)},
      {"stderr", text(r.stderr_text)},
      {"stdout_encoding", encoding(r.stdout_text)},
      {"stderr_encoding", encoding(r.stderr_text)},
      {"stdout_truncated", r.stdout_truncated},
      {"stderr_truncated", r.stderr_truncated},
      {"stdout_dropped", r.stdout_dropped},
      {"stderr_dropped", r.stderr_dropped},
      {"stdout_bytes", r.stdout_bytes},
      {"stderr_bytes", r.stderr_bytes},
      {"stdout_spooled", r.stdout_spooled},
      {"stderr_spooled", r.stderr_spooled},
      {"spool_error", r.spool_error},
      {"seconds", r.seconds},
      {"container",
       {{"namespaces", r.container.namespaces},
        {"net", r.container.net},
        {"cgroup", r.container.cgroup},
        {"cgroup_detail", r.container.cgroup_detail},
        {"limits", r.container.limits},
        {"proof", r.container.proof},
        {"net_dropped", r.container.net_dropped},
        {"verified",
         {{"NoNewPrivs", v.no_new_privs},
          {"Seccomp", v.seccomp},
          {"Seccomp_filters", v.seccomp_filters},
          {"CapEff", v.cap_eff},
          {"CapPrm", v.cap_prm},
          {"CapInh", v.cap_inh},
          {"CapAmb", v.cap_amb}}}}},
  };
}

nlohmann::ordered_json SupervisorReport(const HostFacts& supervised, const Policy* policy) {
  const NamespaceProbe& ns = ProbeJobNamespaces();
  const Availability a = AssessAvailability(supervised, ns.ok, ns.detail);
  auto status = [&](CapabilityId id) {
    const CapabilityStatus s = Assess(id, supervised);
    return nlohmann::ordered_json{{"status", StatusName(s.status)}, {"detail", s.detail}};
  };
  const Attestation attestation = ReadAttestationForThisProcess(AttestationPath(), supervised);
  // The job `run` would start: the policy's, or an empty Spec's.
  auto baseline = PolicyForSpec(Spec{});
  const Policy* planned = policy ? policy : baseline.ok() ? &baseline.value() : nullptr;
  const JobPlan job = planned ? PlanSupervisedJob(*planned, supervised, RunOptions{}) : JobPlan{};
  nlohmann::ordered_json report = {
      {"available", a.available},
      {"reason", a.reason},
      {"proof",
       {{"attestation", AttestationPath()},
        {"attested", attestation.present},
        {"proven_classes", attestation.proven_classes},
        {"detail", attestation.detail},
        {"rule",
         "run, cage::Run, RunPolicy and Start refuse a policy class the attestation does not prove "
         "(battery.proven), unless started with --unproven (RunOptions::unproven)"}}},
      {"namespaces",
       {{"available", supervised.user_namespaces && ns.ok},
        {"detail", supervised.user_namespaces ? ns.detail : supervised.user_namespaces_detail}}},
      {"net_egress_any", status(CapabilityId::kNetEgressAny)},
      {"ipc_job", status(CapabilityId::kIpcJob)},
      {"debug_job", status(CapabilityId::kDebugJob)},
      {"process_container",
       {{"process_group", "always (setsid)"},
        {"pid_namespace", supervised.user_namespaces && ns.ok},
        {"cgroup_leaf", job.cgroup.usable},
        {"cgroup_detail", job.cgroup.detail},
        {"memory_max", status(CapabilityId::kLimitsMemory)},
        {"cpu_max", status(CapabilityId::kLimitsCpu)},
        {"pids_max",
         {{"status", job.limits.pids_available ? "enforced" : "unavailable"},
          {"detail", job.limits.pids_available
                         ? "limits.pids (" + std::to_string(job.limits.pids_max) + ") as pids.max in each job's leaf"
                         : "no pids controller delegated: " + job.cgroup.detail}}}}},
      {"job", planned ? JobPlanReport(job) : nlohmann::ordered_json{{"refusal", PolicyErrorLine(baseline.error())}}},
  };
  if (policy) {
    nlohmann::ordered_json at_fault = nlohmann::ordered_json::array();
    for (const auto& c : job.confinement.placement.at_fault)
      at_fault.push_back({{"id", CapabilityName(c.id)}, {"status", StatusName(c.status)}, {"detail", c.detail}});
    report["placement"] = {{"verdict", VerdictName(job.confinement.placement.verdict)}, {"at_fault", at_fault}};
  }
  return report;
}

}  // namespace oarbank::cage
