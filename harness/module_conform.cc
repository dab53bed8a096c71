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
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/module_trace.h"
#include "harness/reports.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/json_formats.h"
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

// What strace records: file and network calls, process creation (to follow
// forks), and every syscall the seccomp table names, so that a refusal of
// any of them is seen. '?' keeps strace quiet about a name it does not know.
std::string TraceSet() {
  std::string set = "trace=%file,%network,%process";
  std::set<std::string> names;
  for (const auto& rule : SeccompRuleTable()) names.insert(rule.syscall);
  for (const auto& n : names) set += ",?" + n;
  return set;
}

int Usage(const std::string& line) {
  std::cerr << "oarbank-conform: module: " << line << "\n";
  return kExitUsage;
}

}  // namespace

int RunModuleConform(const ModuleConformOptions& o) {
  auto manifest = LoadManifestFile(o.manifest);
  if (!manifest.ok()) {
    std::cerr << ManifestErrorLine(manifest.error()) << "\n";
    return kExitUsage;
  }
  const Manifest& m = manifest.value();
  if (o.argv.empty()) return Usage("no runner suite: give it after --");
  if (access(o.strace.c_str(), X_OK) != 0) return Usage(o.strace + " is not installed (Debian package strace)");
  const uid_t uid = o.uid < 0 ? geteuid() : static_cast<uid_t>(o.uid);
  if (uid != geteuid() && geteuid() != 0) return Usage("--uid needs root");
  if (auto why = PrepareReportDir(o.out); !why.empty()) return Usage("--out " + why);

  ToolRegistry registry{"(none)", {}};
  if (!o.registry.empty()) {
    auto loaded = LoadToolRegistryFile(o.registry);
    if (!loaded.ok()) {
      std::cerr << ErrorLineWithPrefix("registry", loaded.error()) << "\n";
      return kExitUsage;
    }
    registry = std::move(loaded).value();
  } else if (!m.sandbox.tools.empty()) {
    return Usage("the manifest requests tools: give the operator's tool registry with --registry");
  }
  auto tools = ResolveTools(registry, m.sandbox.tools);
  if (!tools.ok()) {
    std::cerr << ManifestErrorLine(tools.error()) << "\n";
    return kExitUsage;
  }

  // The job tree.
  std::string pattern = "/tmp/oarbank-module-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return Usage(std::string("mkdtemp: ") + strerror(errno));
  const std::string root = fs::canonical(pattern).string();
  chmod(root.c_str(), 0755);
  for (const char* dir : {"work", "work/tmp", "data", "trace"}) {
    const std::string p = root + "/" + dir;
    mkdir(p.c_str(), 0700);
    if (chown(p.c_str(), uid, uid) != 0 && uid != geteuid()) return Usage("chown " + p + ": " + strerror(errno));
  }
  int broker_fd = -1;
  JobDirs job;
  job.role = Role::kRunner;
  char bundle_buf[PATH_MAX];
  const std::string bundle = o.bundle.empty() ? fs::path(o.manifest).parent_path().string() : o.bundle;
  if (realpath(bundle.empty() ? "." : bundle.c_str(), bundle_buf) == nullptr)
    return Usage("bundle " + bundle + ": " + strerror(errno));
  job.bundle = bundle_buf;
  job.work = root + "/work";
  job.tmp = root + "/work/tmp";
  job.data = root + "/data";
  job.proxy_port = 3128;  // nothing listens: the suite's network calls fail at the proxy, never around it
  if (!m.sandbox.containers.empty()) {
    job.broker = root + "/broker.sock";
    broker_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", job.broker->c_str());
    if (bind(broker_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(broker_fd, 4) != 0)
      return Usage("broker socket: " + std::string(strerror(errno)));
  }
  const std::string tools_file = root + "/work/tmp/oarbank-tools.json";
  if (auto e = WriteToolsFile(tools_file, tools.value())) return Usage(e->what);

  auto policy_json = BuildPolicyJson(m, tools.value(), job);
  if (!policy_json.ok()) return Usage(policy_json.error().where + ": " + policy_json.error().what);
  const std::string policy_path = root + "/policy.json";
  std::ofstream(policy_path) << policy_json.value().dump(2) << "\n";
  auto policy = ParsePolicy(policy_json.value().dump());
  if (!policy.ok()) {
    std::cerr << PolicyErrorLine(policy.error()) << "\n";
    return kExitUsage;
  }
  HostFacts host = ProbeHost();
  const auto lint = LintPortability(m, host);
  // The plan the launcher will make as the suite's uid: /etc is narrowed
  // for root only.
  HostFacts as_uid = host;
  as_uid.runs_as_root = uid == 0;
  if (uid != 0) as_uid.etc_world_readable.clear();
  const Plan plan = PlanConfinement(policy.value(), as_uid);

  // The run, traced from outside the cage.
  std::vector<std::string> args = {o.strace,
                                   "-f",
                                   "-ff",
                                   "-qq",
                                   "-s",
                                   "4096",
                                   "-y",
                                   "-o",
                                   root + "/trace/t",
                                   "-e",
                                   TraceSet(),
                                   o.agent,
                                   "sandbox-exec",
                                   std::string("--env=") + kToolsFileEnv + "=" + tools_file,
                                   policy_path,
                                   "--"};
  args.insert(args.end(), o.argv.begin(), o.argv.end());
  // sandbox-exec builds the suite's environment (environment.h) from the policy and --env.
  const std::vector<std::string> env = BuildModuleEnvironment(policy.value(), {{kToolsFileEnv, tools_file}});
  std::vector<char*> argv_c, env_c;
  for (auto& a : args) argv_c.push_back(const_cast<char*>(a.c_str()));
  argv_c.push_back(nullptr);
  for (auto& e : env) env_c.push_back(const_cast<char*>(e.c_str()));
  env_c.push_back(nullptr);
  const std::string out_path = root + "/stdout", err_path = root + "/stderr";
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(kExitUsage);
    if (chdir(job.work->c_str()) != 0) _exit(kExitUsage);
    if (uid != geteuid() &&
        (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0))
      _exit(kExitUsage);
    execve(argv_c[0], argv_c.data(), env_c.data());
    _exit(127);
  }
  if (pid < 0) return Usage(std::string("fork: ") + strerror(errno));
  setpgid(pid, pid);
  int status = 0;
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() - started > std::chrono::duration<double>(o.timeout_s)) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);  // nothing of the suite outlives it
  if (broker_fd >= 0) close(broker_fd);

  const ModuleTrace trace = ReadModuleTrace(root + "/trace/t");
  ExplainContext ctx;
  ctx.manifest = &m;
  ctx.policy = &policy.value();
  ctx.plan = &plan;
  ctx.registry = &registry;
  ctx.homes = HostHomes();
  std::vector<Denial> others;
  const std::vector<Denial> denials = ExplainDenials(trace.calls, ctx, &others);

  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  std::string verdict, summary;
  int rc = 0;
  if (timed_out) {
    verdict = "FAIL";
    summary = "the suite did not finish within " + std::to_string(static_cast<int>(o.timeout_s)) + " s";
    rc = kExitFailed;
  } else if (!trace.module_ran) {
    verdict = "REFUSED";
    summary = "the launcher did not run the suite (exit " + std::to_string(exit_code) + ")";
    rc = exit_code == kExitUsage ? kExitUsage : kExitNotEnforced;
  } else if (exit_code == 0) {
    verdict = "PASS";
    summary = "the suite passed under the declared grants";
  } else {
    verdict = "FAIL";
    summary = signal != 0 ? "the suite was killed by signal " + std::to_string(signal)
                          : "the suite exited " + std::to_string(exit_code);
    rc = kExitFailed;
  }

  nlohmann::ordered_json report;
  report["format"] = kModuleFormat;
  report["manifest"] = fs::absolute(o.manifest).string();
  report["module"] = m.name;
  report["version"] = m.version;
  report["uid"] = uid;
  report["argv"] = o.argv;
  report["verdict"] = verdict;
  report["summary"] = summary;
  report["exit_code"] = exit_code;
  report["signal"] = signal;
  report["denials"] = nlohmann::ordered_json::array();
  for (const auto& d : denials) report["denials"].push_back(DenialJson(d));
  report["not_the_cage"] = nlohmann::ordered_json::array();
  for (const auto& d : others) report["not_the_cage"].push_back(DenialJson(d));
  report["portability"] = PortabilityJson(lint);
  report["policy"] = policy_json.value();
  report["stdout_tail"] = ReadTail(out_path);
  report["stderr_tail"] = ReadTail(err_path);
  const std::string report_path = (fs::path(o.out) / "module.json").string();
  const std::string unwritten = WriteReportFile(report_path, report.dump(2) + "\n");  // --out checked at the start

  std::cout << "oarbank-conform module: " << m.name << " " << m.version << " as uid " << uid << ": " << verdict << " ("
            << summary << ")\n";
  if (verdict == "REFUSED") std::cout << "launcher: " << ReadTail(err_path);
  if (!denials.empty()) {
    std::cout << (verdict == "PASS" ? "refusals the suite survived" : "denials the cage caused") << " ("
              << denials.size() << "):\n";
    for (size_t i = 0; i < denials.size(); ++i) std::cout << "  " << i + 1 << ". " << DenialText(denials[i]) << "\n";
  } else if (verdict == "FAIL") {
    std::cout << "no refusal by the cage was seen: the suite failed on its own (see stderr_tail in the report)\n";
  }
  if (!others.empty())
    std::cout << others.size() << " refusal(s) by file permissions, not the cage (see not_the_cage in the report)\n";
  std::cout << "portability:\n" << PortabilityText(lint);
  if (unwritten.empty())
    std::cout << "report: " << report_path << "\n";
  else
    std::cerr << "oarbank-conform module: cannot write the report " << unwritten << "\n";
  if (o.keep) std::cout << "job tree: " << root << "\n";
  std::error_code ec;
  if (!o.keep) fs::remove_all(root, ec);
  return unwritten.empty() ? rc : std::max(rc, 1);
}

}  // namespace oarbank
