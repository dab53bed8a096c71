#include "harness/module_conform.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <variant>

#include <nlohmann/json.hpp>

#include "harness/reports.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/json_formats.h"
#include "sandbox/common/subprocess.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/explain/explain.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/manifest/manifest.h"
#include "sandbox/manifest/manifest_policy.h"
#include "sandbox/manifest/portability.h"
#include "sandbox/manifest/tool_registry.h"
#include "sandbox/plan/plan.h"
#include "sandbox/seccomp/rules.h"
#include "sandbox/supervise/environment.h"

namespace oarbank {
namespace {

namespace fs = std::filesystem;

constexpr int kExitFailed = 1;
constexpr size_t kTail = 4000;

std::string ReadTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > kTail ? text.substr(text.size() - kTail) : text;
}

int Usage(const std::string& line) {
  std::cerr << "oarbank-conform: module: " << line << "\n";
  return kExitUsage;
}

// What the run needs before anything is made: the manifest, the operator's
// registry and the tools it resolves.
struct Inputs {
  Manifest manifest;
  ToolRegistry registry{"(none)", {}};
  std::vector<ResolvedTool> tools;
  uid_t uid = 0;
};

std::variant<Inputs, int> LoadInputs(const ModuleConformOptions& o) {
  auto manifest = LoadManifestFile(o.manifest);
  if (!manifest.ok()) {
    std::cerr << ManifestErrorLine(manifest.error()) << "\n";
    return kExitUsage;
  }
  Inputs in;
  in.manifest = std::move(manifest).value();
  if (o.argv.empty()) return Usage("no runner suite: give it after --");
  if (access(o.strace.c_str(), X_OK) != 0) return Usage(o.strace + " is not installed (Debian package strace)");
  in.uid = o.uid < 0 ? geteuid() : static_cast<uid_t>(o.uid);
  if (in.uid != geteuid() && geteuid() != 0) return Usage("--uid needs root");
  if (auto why = PrepareReportDir(o.out); !why.empty()) return Usage("--out " + why);
  if (!o.registry.empty()) {
    auto loaded = LoadToolRegistryFile(o.registry);
    if (!loaded.ok()) {
      std::cerr << ErrorLineWithPrefix("registry", loaded.error()) << "\n";
      return kExitUsage;
    }
    in.registry = std::move(loaded).value();
  } else if (!in.manifest.sandbox.tools.empty()) {
    return Usage("the manifest requests tools: give the operator's tool registry with --registry");
  }
  auto tools = ResolveTools(in.registry, in.manifest.sandbox.tools);
  if (!tools.ok()) {
    std::cerr << ManifestErrorLine(tools.error()) << "\n";
    return kExitUsage;
  }
  in.tools = std::move(tools).value();
  return in;
}

// The throw-away job tree (work, work/tmp, data, trace) under /tmp, owned
// by the suite's uid; removed when it goes out of scope unless kept.
class JobTree {
 public:
  JobTree(const JobTree&) = delete;
  JobTree& operator=(const JobTree&) = delete;
  ~JobTree() {
    std::error_code ec;
    if (!root_.empty() && !keep_) fs::remove_all(root_, ec);
  }
  static std::variant<std::unique_ptr<JobTree>, std::string> Make(uid_t uid, bool keep) {
    std::string pattern = "/tmp/oarbank-module-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return std::string("mkdtemp: ") + strerror(errno);
    std::unique_ptr<JobTree> tree(new JobTree(fs::canonical(pattern).string(), keep));
    chmod(tree->root_.c_str(), 0755);
    for (const char* dir : {"work", "work/tmp", "data", "trace"}) {
      const std::string p = tree->Path(dir);
      mkdir(p.c_str(), 0700);
      if (chown(p.c_str(), uid, uid) != 0 && uid != geteuid()) return "chown " + p + ": " + strerror(errno);
    }
    return tree;
  }
  const std::string& root() const { return root_; }
  std::string Path(const std::string& rel) const { return root_ + "/" + rel; }

 private:
  JobTree(std::string root, bool keep) : root_(std::move(root)), keep_(keep) {}
  std::string root_;
  bool keep_;
};

// The job a runner would get, in the tree: its directories, a listening
// broker socket when containers are requested, the tools file, the policy
// (written and parsed) and the plan the launcher will make as the suite's uid.
struct Job {
  JobDirs dirs;
  UniqueFd broker;
  std::string tools_file, policy_path;
  nlohmann::ordered_json policy_json;
  std::optional<Policy> policy;
  Plan plan;
  std::vector<PlatformLint> lint;
};

std::variant<Job, int> PrepareJob(const ModuleConformOptions& o, const Inputs& in, const JobTree& tree) {
  Job job;
  job.dirs.role = Role::kRunner;
  char bundle_buf[PATH_MAX];
  const std::string bundle = o.bundle.empty() ? fs::path(o.manifest).parent_path().string() : o.bundle;
  if (realpath(bundle.empty() ? "." : bundle.c_str(), bundle_buf) == nullptr)
    return Usage("bundle " + bundle + ": " + strerror(errno));
  job.dirs.bundle = bundle_buf;
  job.dirs.work = tree.Path("work");
  job.dirs.tmp = tree.Path("work/tmp");
  job.dirs.data = tree.Path("data");
  job.dirs.proxy_port = 3128;  // nothing listens: the suite's network calls fail at the proxy, never around it
  if (!in.manifest.sandbox.containers.empty()) {
    job.dirs.broker = tree.Path("broker.sock");
    job.broker.Reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", job.dirs.broker->c_str());
    if (!job.broker.valid() || bind(job.broker.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(job.broker.get(), 4) != 0)
      return Usage("broker socket: " + std::string(strerror(errno)));
  }
  job.tools_file = tree.Path("work/tmp/oarbank-tools.json");
  if (auto e = WriteToolsFile(job.tools_file, in.tools)) return Usage(e->what);
  auto policy_json = BuildPolicyJson(in.manifest, in.tools, job.dirs);
  if (!policy_json.ok()) return Usage(policy_json.error().where + ": " + policy_json.error().what);
  job.policy_json = policy_json.value();
  job.policy_path = tree.Path("policy.json");
  std::ofstream(job.policy_path) << job.policy_json.dump(2) << "\n";
  auto policy = ParsePolicy(job.policy_json.dump());
  if (!policy.ok()) {
    std::cerr << PolicyErrorLine(policy.error()) << "\n";
    return kExitUsage;
  }
  job.policy = policy.value();
  const HostFacts host = ProbeHost();
  job.lint = LintPortability(in.manifest, host);
  // The plan the launcher will make as the suite's uid: /etc is narrowed
  // for root only.
  HostFacts as_uid = host;
  as_uid.runs_as_root = in.uid == 0;
  if (in.uid != 0) as_uid.etc_world_readable.clear();
  job.plan = PlanConfinement(*job.policy, as_uid);
  return job;
}

// `strace -f -ff -y` (from outside the cage) around
// `oarbank-agent sandbox-exec POLICY -- ARGV`, its output in the tree.
CapturedRun RunTracedSuite(const ModuleConformOptions& o, const Inputs& in, const JobTree& tree, const Job& job) {
  std::vector<std::string> args = StraceCommand(o.strace, tree.Path("trace/t"));
  for (std::string arg :
       {o.agent, std::string("sandbox-exec"), std::string("--env=") + kToolsFileEnv + "=" + job.tools_file,
        job.policy_path, std::string("--")})
    args.push_back(std::move(arg));
  args.insert(args.end(), o.argv.begin(), o.argv.end());
  const UniqueFd out(open(tree.Path("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const UniqueFd err(open(tree.Path("stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid() || !err.valid()) {
    CapturedRun failed;
    failed.error = tree.root() + ": cannot create the suite's output files: " + strerror(errno);
    return failed;
  }
  SubprocessSpec spec;
  spec.argv = args;
  // sandbox-exec builds the suite's environment (environment.h) from the policy and --env.
  spec.env = BuildModuleEnvironment(*job.policy, {{kToolsFileEnv, job.tools_file}});
  spec.stdout_fd = out.get();
  spec.stderr_fd = err.get();
  spec.cwd = *job.dirs.work;
  if (in.uid != geteuid()) spec.uid = in.uid;
  spec.new_process_group = true;  // nothing of the suite outlives it
  CaptureLimits limits;
  limits.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                           std::chrono::duration<double>(o.timeout_s));
  return RunCaptured(spec, limits);
}

struct SuiteVerdict {
  std::string verdict, summary;
  int rc = 0;
  int exit_code = -1, signal = 0;
};

SuiteVerdict Judge(const CapturedRun& run, const ModuleTrace& trace, double timeout_s) {
  SuiteVerdict v;
  v.exit_code = WIFEXITED(run.wait_status) ? WEXITSTATUS(run.wait_status) : -1;
  v.signal = WIFSIGNALED(run.wait_status) ? WTERMSIG(run.wait_status) : 0;
  if (run.timed_out) {
    v.verdict = "FAIL";
    v.summary = "the suite did not finish within " + std::to_string(static_cast<int>(timeout_s)) + " s";
    v.rc = kExitFailed;
  } else if (!trace.module_ran) {
    v.verdict = "REFUSED";
    v.summary = "the launcher did not run the suite (exit " + std::to_string(v.exit_code) + ")";
    v.rc = v.exit_code == kExitUsage ? kExitUsage : kExitNotEnforced;
  } else if (v.exit_code == 0) {
    v.verdict = "PASS";
    v.summary = "the suite passed under the declared grants";
  } else {
    v.verdict = "FAIL";
    v.summary = v.signal != 0 ? "the suite was killed by signal " + std::to_string(v.signal)
                              : "the suite exited " + std::to_string(v.exit_code);
    v.rc = kExitFailed;
  }
  return v;
}

struct Explained {
  std::vector<Denial> denials;  // the cage's
  std::vector<Denial> others;   // file permissions', not the cage's
};

nlohmann::ordered_json ModuleReport(const ModuleConformOptions& o, const Inputs& in, const Job& job,
                                    const JobTree& tree, const SuiteVerdict& v, const Explained& e) {
  nlohmann::ordered_json report;
  report["format"] = kModuleFormat;
  report["manifest"] = fs::absolute(o.manifest).string();
  report["module"] = in.manifest.name;
  report["version"] = in.manifest.version;
  report["uid"] = in.uid;
  report["argv"] = o.argv;
  report["verdict"] = v.verdict;
  report["summary"] = v.summary;
  report["exit_code"] = v.exit_code;
  report["signal"] = v.signal;
  report["denials"] = nlohmann::ordered_json::array();
  for (const auto& d : e.denials) report["denials"].push_back(DenialJson(d));
  report["not_the_cage"] = nlohmann::ordered_json::array();
  for (const auto& d : e.others) report["not_the_cage"].push_back(DenialJson(d));
  report["portability"] = PortabilityJson(job.lint);
  report["policy"] = job.policy_json;
  report["stdout_tail"] = ReadTail(tree.Path("stdout"));
  report["stderr_tail"] = ReadTail(tree.Path("stderr"));
  return report;
}

void PrintSummary(const Inputs& in, const Job& job, const JobTree& tree, const SuiteVerdict& v, const Explained& e) {
  std::cout << "oarbank-conform module: " << in.manifest.name << " " << in.manifest.version << " as uid " << in.uid
            << ": " << v.verdict << " (" << v.summary << ")\n";
  if (v.verdict == "REFUSED") std::cout << "launcher: " << ReadTail(tree.Path("stderr"));
  if (!e.denials.empty()) {
    std::cout << (v.verdict == "PASS" ? "refusals the suite survived" : "denials the cage caused") << " ("
              << e.denials.size() << "):\n";
    for (size_t i = 0; i < e.denials.size(); ++i)
      std::cout << "  " << i + 1 << ". " << DenialText(e.denials[i]) << "\n";
  } else if (v.verdict == "FAIL") {
    std::cout << "no refusal by the cage was seen: the suite failed on its own (see stderr_tail in the report)\n";
  }
  if (!e.others.empty())
    std::cout << e.others.size() << " refusal(s) by file permissions, not the cage (see not_the_cage in the report)\n";
  std::cout << "portability:\n" << PortabilityText(job.lint);
}

}  // namespace

int RunModuleConform(const ModuleConformOptions& o) {
  auto loaded = LoadInputs(o);
  if (auto* rc = std::get_if<int>(&loaded)) return *rc;
  const Inputs& in = std::get<Inputs>(loaded);
  auto made = JobTree::Make(in.uid, o.keep);
  if (auto* why = std::get_if<std::string>(&made)) return Usage(*why);
  const JobTree& tree = *std::get<std::unique_ptr<JobTree>>(made);
  auto prepared = PrepareJob(o, in, tree);
  if (auto* rc = std::get_if<int>(&prepared)) return *rc;
  const Job& job = std::get<Job>(prepared);

  const CapturedRun run = RunTracedSuite(o, in, tree, job);
  if (!run.started) return Usage(run.error);
  const ModuleTrace trace = ReadModuleTrace(tree.Path("trace/t"));
  ExplainContext ctx;
  ctx.manifest = &in.manifest;
  ctx.policy = &*job.policy;
  ctx.plan = &job.plan;
  ctx.registry = &in.registry;
  ctx.homes = HostHomes();
  Explained explained;
  explained.denials = ExplainDenials(trace.calls, ctx, &explained.others);
  const SuiteVerdict v = Judge(run, trace, o.timeout_s);

  const std::string report_path = (fs::path(o.out) / "module.json").string();
  const std::string unwritten =  // --out checked at the start
      WriteReportFile(report_path, ModuleReport(o, in, job, tree, v, explained).dump(2) + "\n");
  PrintSummary(in, job, tree, v, explained);
  if (unwritten.empty())
    std::cout << "report: " << report_path << "\n";
  else
    std::cerr << "oarbank-conform module: cannot write the report " << unwritten << "\n";
  if (o.keep) std::cout << "job tree: " << tree.root() << "\n";
  return unwritten.empty() ? v.rc : std::max(v.rc, 1);
}

}  // namespace oarbank
