#include "sandbox/cli/cage_command.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "sandbox/cli/explain_option.h"
#include "sandbox/cli/job_io.h"
#include "sandbox/cli/numbers.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/grant_path.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/unique_fd.h"
#include "sandbox/egress/allowlist.h"
#include "sandbox/egress/resolver.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/launch/git_history.h"
#include "sandbox/plan/plan.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {

struct CageCommand::Options {
  cage::Spec spec;
  bool exec_writable = false;
  CLI::Option* exec_writable_option = nullptr;
  std::vector<std::string> env;
  double timeout_s = 0;
  JobIoOptions io;
  bool unproven = false;
  bool explain = false;
  int abi_cap = -1;
  std::vector<std::string> test_public;
  std::string test_resolver;
};

namespace {

// The Spec field an error names, as the option that set it.
std::string OptionFor(const std::string& where) {
  static const std::pair<const char*, const char*> kOptions[] = {
      {"worktree", "--worktree"},    {"scratch", "--scratch"},     {"state_dirs", "--state"}, {"read_dirs", "--read"},
      {"read_files", "--read-file"}, {"read_only", "--read-only"}, {"allow", "--allow"},      {"git_dir", "--git-dir"},
  };
  for (const auto& [field, option] : kOptions)
    if (where.rfind(field, 0) == 0) return option + where.substr(strlen(field));
  return where;
}

// mkdir -p, each new directory 0700 (the scratch is the job's HOME), made
// below the deepest directory that exists, reached as a grant path is
// (common/grant_path.h): never through a link a job could have planted, so
// an earlier job cannot make this one create directories elsewhere.
std::optional<std::string> MakeScratch(const std::string& path) {
  if (path.empty() || path[0] != '/') return "expected an absolute path, got \"" + path + "\"";
  std::string existing = path;
  std::vector<std::string> missing;  // outermost first
  for (;;) {
    while (existing.size() > 1 && existing.back() == '/') existing.pop_back();
    struct stat st {};
    if (existing == "/" || lstat(existing.c_str(), &st) == 0) break;
    if (errno != ENOENT) return "cannot create " + path + ": " + strerror(errno);
    const size_t slash = existing.rfind('/');
    missing.insert(missing.begin(), existing.substr(slash + 1));
    existing = slash == 0 ? "/" : existing.substr(0, slash);
  }
  auto dir = ResolveGrantPath(existing);
  if (!dir.ok()) return dir.error().what;
  UniqueFd fd(OpenNoSymlinksAt(AT_FDCWD, dir.value().path.c_str(), O_PATH | O_DIRECTORY));
  if (!fd.valid()) return "not a directory: " + existing;
  for (const auto& name : missing) {
    if (name == "." || name == "..") return "expected a path without . or .. below what exists, got " + path;
    if (mkdirat(fd.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + path + ": " + strerror(errno);
    UniqueFd next(openat(fd.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid())
      return "cannot create " + path + ": " + name + ": " +
             (errno == ENOTDIR || errno == ELOOP ? "not a directory" : strerror(errno));
    fd = std::move(next);
  }
  return std::nullopt;
}

// What history a worktree has, for --json and a terminal: its own .git, or
// none, possibly inside another checkout whose history is not in the cage.
nlohmann::ordered_json WorktreeHistory(const std::string& worktree) {
  if (worktree.empty()) return nullptr;
  auto wt = ResolveGrantPath(worktree);
  if (!wt.ok()) return nullptr;
  struct stat st {};
  if (fstatat(AT_FDCWD, (wt.value().path + "/.git").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    return {{"kind", "repository"}};
  const std::string checkout = EnclosingCheckout(wt.value().path);
  nlohmann::ordered_json h = {{"kind", checkout.empty() ? "none" : "inside-checkout"}};
  if (!checkout.empty()) h["checkout"] = checkout;
  h["note"] = (checkout.empty() ? wt.value().path + " is not in a git repository"
                                : wt.value().path + " is a subdirectory of the checkout at " + checkout +
                                      ", whose history is not in the cage") +
              ": there is no history to protect, a repository the job creates there is its own, and git must "
              "run on it only inside the cage (docs/coding-agent.md)";
  return h;
}

// "NAME=VALUE", or "NAME" for the caller's value (which must be set).
std::optional<std::string> AddEnv(const std::string& entry, std::map<std::string, std::string>& env) {
  const auto eq = entry.find('=');
  const std::string name = entry.substr(0, eq);
  if (name.empty() ||
      name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos ||
      (name[0] >= '0' && name[0] <= '9'))
    return "--env: expected NAME or NAME=VALUE (NAME: letters, digits, _), got \"" + entry + "\"";
  if (eq != std::string::npos) {
    env[name] = entry.substr(eq + 1);
    return std::nullopt;
  }
  const char* value = getenv(name.c_str());
  if (value == nullptr) return "--env " + name + ": not set in this environment (give NAME=VALUE)";
  env[name] = value;
  return std::nullopt;
}

// The job's own sockets, for --json: what this host gives the job (the
// policy's ipc, enforced by the job's network namespace under run, and
// from Landlock ABI 9 its unix sockets: plan.h's JobUnixSockets).
nlohmann::ordered_json JobSockets(const Policy& policy, int landlock_abi) {
  const bool job = policy.ipc() == IpcMode::kJob;
  const bool unix_sockets = JobUnixSockets(policy, ToAbi(landlock_abi));
  return {{"ipc", IpcModeName(policy.ipc())},
          {"loopback_tcp_udp", job},
          {"unix_sockets", unix_sockets},
          {"unix", unix_sockets ? std::string("the job's own only: a pathname socket its processes bound, wherever it "
                                              "may write (Landlock RESOLVE_UNIX refuses every other), abstract ones in "
                                              "its own network namespace and Landlock domain")
                   : !job       ? std::string("refused: ipc none")
                          : "refused: a pathname socket could be a host daemon's, and Landlock confines unix connects "
                            "to the job's own sockets only from ABI 9 (this host: " +
                                std::to_string(landlock_abi) + ")"}};
}

// What the cage was made of, for --json: the policy the Spec became.
nlohmann::ordered_json CageSummary(const Policy& policy, const nlohmann::ordered_json& history, int landlock_abi) {
  nlohmann::ordered_json writable = nlohmann::ordered_json::array(), read = nlohmann::ordered_json::array(),
                         read_only = nlohmann::ordered_json::array();
  for (const auto& g : policy.grants()) (g.access == Access::kReadWrite ? writable : read).push_back(g.path);
  for (const auto& g : policy.read_only()) read_only.push_back(g.path);
  return {{"writable", writable},
          {"read", read},
          {"read_only", read_only},
          {"exec_writable", policy.exec_writable()},
          {"net", NetModeName(policy.net().mode)},
          {"allow", policy.net().allow},
          {"job_sockets", JobSockets(policy, landlock_abi)},
          {"history", history}};
}

// A relative path on the command line is taken from the working directory.
void MakeAbsolute(std::string& path) {
  if (path.empty() || path[0] == '/') return;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) != nullptr) path = std::string(cwd) + "/" + path;
}

}  // namespace

bool CageCommand::Names(const std::string& name) { return name == "cage"; }

CageCommand::CageCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  cage::Spec& s = o.spec;
  sub_ = app.add_subcommand("cage", "Run ARGV in the coding-agent cage: a worktree, the agent's state, nothing else");
  sub_->add_option("--worktree", s.worktree, "The working directory (read-only unless --writable)");
  sub_->add_flag("--writable", s.worktree_writable,
                 "The worktree is read-write; its .git (or the .git pointer file and the git and common directories "
                 "it names) stays read-only");
  sub_->add_option("--state", s.state_dirs, "A read-write directory of the agent's own: its state, caches (repeatable)")
      ->allow_extra_args(false);
  sub_->add_option("--scratch", s.scratch, "Read-write HOME and TMPDIR of the job (created 0700 if missing)");
  sub_->add_option("--read", s.read_dirs, "A read-only directory (repeatable)")->allow_extra_args(false);
  sub_->add_option("--read-file", s.read_files, "A read-only file (repeatable)")->allow_extra_args(false);
  sub_->add_option("--git-dir", s.git_dir,
                   "The worktree's git directory, where its .git pointer names one that does not list the worktree "
                   "back (a --separate-git-dir repository); otherwise such a pointer is refused");
  sub_->add_option("--read-only", s.read_only,
                   "A part of a writable directory kept read-only, by a read-only bind (repeatable)")
      ->allow_extra_args(false);
  o.exec_writable_option =
      sub_->add_flag("--exec-writable,!--no-exec-writable", o.exec_writable,
                     "Whether the job may execute what it writes (default: on with --writable, off otherwise)");
  sub_->add_option("--allow", s.allow,
                   "HOST[:PORT] the job may reach through its own egress proxy ('*.' for subdomains, 443 by default; "
                   "repeatable). None: no network")
      ->allow_extra_args(false);
  sub_->add_flag("--debug", s.debug,
                 "Let the job trace its own processes (ptrace, process_vm_readv/writev: gdb, strace, "
                 "LeakSanitizer); nothing outside the job, whose pid namespace holds nothing else");
  sub_->add_flag("!--no-job-sockets", s.job_sockets,
                 "No sockets of the job's own (by default it has TCP and UDP on the loopback of its own network "
                 "namespace, listening included; nothing outside reaches them)");
  sub_->add_option("--env", o.env, "NAME=VALUE, or NAME for this environment's value (repeatable); nothing else passes")
      ->allow_extra_args(false);
  sub_->add_option("--abi-floor", s.abi_floor, "Refuse to run below this Landlock ABI (default 1)")
      ->check(CLI::Range(1, 1000));
  sub_->add_option("--timeout", o.timeout_s, "Kill the job after S seconds (0: none; else 0.01 to 1e7)")
      ->check(FiniteRange(kMinTimeoutSeconds, kMaxTimeoutSeconds, /*zero_means_none=*/true));
  AddJobIoOptions(sub_, o.io,
                  "Print the result as JSON (as run --json, with what the cage was made of); without it the job's "
                  "output streams to stdout and stderr as it comes");
  AddExplainOption(sub_, o.explain);
  sub_->add_flag("--unproven", o.unproven,
                 "Run even though the battery attestation does not prove the cage's policy class here (the result "
                 "says \"unproven (operator override)\")");
  AddLandlockAbiMax(sub_, o.abi_cap);
  sub_->add_option("--egress-test-public-range", o.test_public,
                   "The job's egress proxy treats this CIDR as public; it must lie inside 198.18.0.0/15, the "
                   "benchmarking range no real host uses (the battery's test hosts; repeatable)")
      ->allow_extra_args(false);
  AddTestResolver(sub_, "--egress-test-resolver", o.test_resolver,
                  "The job's egress proxy answers lookups from this file");
  sub_->add_option("argv", s.argv, "Command to run in the cage (after --)")->required();
}

std::optional<int> CageCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  Options o = *o_;
  cage::Spec& spec = o.spec;
  if (spec.worktree_writable && spec.worktree.empty()) return UsageLine("--writable: needs --worktree DIR");
  MakeAbsolute(spec.worktree);
  MakeAbsolute(spec.scratch);
  MakeAbsolute(spec.git_dir);
  for (auto* paths : {&spec.state_dirs, &spec.read_dirs, &spec.read_files, &spec.read_only})
    for (auto& path : *paths) MakeAbsolute(path);
  if (o.exec_writable_option->count() > 0) spec.exec_writable = o.exec_writable;
  if (!spec.scratch.empty())
    if (auto why = MakeScratch(spec.scratch)) return UsageLine("--scratch: " + *why);
  cage::RunOptions options;
  for (const auto& entry : o.env)
    if (auto why = AddEnv(entry, options.env)) return UsageLine(*why);
  options.timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
  options.unproven = o.unproven;
  options.landlock_abi_max = o.abi_cap;
  // Every path and host is checked before anything runs: bad input is 64,
  // a history that cannot be carved out safely is a refusal (70).
  auto policy = cage::PolicyForSpec(spec);
  if (!policy.ok()) {
    const Error& e = policy.error();
    if (e.where == cage::kGitCarveOutField) {
      fprintf(stderr, "sandbox: refused: %s: %s\n", e.where.c_str(), e.what.c_str());
      return kExitNotEnforced;
    }
    return UsageLine(OptionFor(e.where) + ": " + e.what);
  }
  cage::JobHooks hooks;
  if (!SetEgress(JobEgressOptions{}, o.test_public, o.test_resolver, hooks)) return kExitUsage;
  if (!ApplyJobIo(o.io, WritableGrants(policy.value()), options)) return kExitUsage;
  std::unique_ptr<JobExplainer> explainer;
  if (o.explain) {
    int refused = 0;
    explainer = JobExplainer::Prepare(policy.value(), Speaker::kCage, hooks, &refused);
    if (!explainer) return refused;
  }
  const nlohmann::ordered_json history = WorktreeHistory(spec.worktree);
  if (!o.io.json && history.is_object() && history.contains("note") && isatty(STDERR_FILENO))
    fprintf(stderr, "sandbox: %s\n", history["note"].get<std::string>().c_str());
  return RunJobAndReport(
      o.io, options, [&](const cage::RunOptions& opts) { return cage::RunSpec(spec, opts, hooks); },
      {{"cage",
        CageSummary(policy.value(), history, ProbeHost(o.abi_cap, LaunchProbeScope(policy.value())).landlock_abi)}},
      explainer ? std::function<JobAfterword()>([&] { return explainer->Explain(); }) : nullptr);
}

}  // namespace oarbank
