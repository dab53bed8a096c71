#include "sandbox/cli/run_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/cli/numbers.h"
#include "sandbox/cli/raw_terminal.h"
#include "sandbox/cli/shared_options.h"
#include "sandbox/common/exit_codes.h"
#include "sandbox/common/read_file.h"
#include "sandbox/egress/resolver.h"
#include "sandbox/policy/policy.h"
#include "sandbox/supervise/job_egress.h"
#include "sandbox/supervise/supervisor.h"

namespace oarbank {
namespace {

// `run`'s byte bounds (its timeout's are shared_options.h's).
constexpr uint64_t kMaxInMemoryCap = 16ull << 20;  // a cap kept in memory (and in the JSON)
constexpr uint64_t kMaxSpooledCap = 1ull << 40;    // a cap written to --stdout-file / --stderr-file
constexpr uint64_t kMaxShmSize = 16ull << 30;      // --shm-size

struct SpoolFiles {
  std::string stdout_path, stderr_path;
};

}  // namespace

struct RunCommand::Options {
  std::string policy;
  std::vector<std::string> argv;
  cage::RunOptions run;
  JobEgressOptions egress;  // becomes the job's hooks (cage::JobHooks) once parsed
  double timeout_s = 0;
  std::string stdout_max = "1M", stderr_max = "1M";
  SpoolFiles spool;
  bool json = false;
  std::vector<std::string> env;
  std::string shm_size = "64M";
  bool relay_stdin = false;
  std::vector<std::string> egress_public;
  std::string egress_resolver;
  int abi_cap = -1;
};

namespace {

// Without --json the job's output streams to stdout and stderr as it comes
// (a stream with a --stdout-file / --stderr-file goes only there).
int SupervisedRun(const std::string& policy_path, const std::vector<std::string>& argv, cage::RunOptions options,
                  const cage::JobHooks& hooks, bool json, const SpoolFiles& spool) {
  auto policy = LoadPolicyFile(policy_path);
  if (!policy.ok()) {
    fprintf(stderr, "%s\n", PolicyErrorLine(policy.error()).c_str());
    return PolicyErrorExit(policy.error());
  }
  const bool stream_out = !json && spool.stdout_path.empty();
  const bool stream_err = !json && spool.stderr_path.empty();
  if (stream_out) options.stream_stdout_fd = STDOUT_FILENO;
  if (stream_err) options.stream_stderr_fd = STDERR_FILENO;
  cage::Result result;
  {
    // The caller's terminal is raw only while the job runs on its own.
    std::optional<RawTerminal> raw;
    if (options.pty) raw.emplace(STDIN_FILENO);
    result = cage::RunPolicy(policy.value(), argv, options, hooks);
  }
  int status = result.signal != 0 ? 128 + result.signal : result.exit_code;
  switch (result.fault) {
    case cage::Fault::kRefused: status = kExitNotEnforced; break;
    case cage::Fault::kExec: status = kExitExecFailed; break;
    case cage::Fault::kNone:
    case cage::Fault::kTimeout:
    case cage::Fault::kOom: break;
  }
  try {
    if (json) {
      nlohmann::ordered_json report = cage::ResultReport(result);
      report["stdout_file"] =
          spool.stdout_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spool.stdout_path);
      report["stderr_file"] =
          spool.stderr_path.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(spool.stderr_path);
      // A reason naming a path that is not UTF-8 is shown with U+FFFD, never refused.
      const std::string text = report.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      fwrite(text.data(), 1, text.size(), stdout);
      fputc('\n', stdout);
    } else {
      // What streamed was all of it; a spool file holds up to its cap.
      for (const auto& [cut, dropped, name] :
           {std::tuple{result.stdout_truncated && !stream_out, result.stdout_dropped, "stdout"},
            {result.stderr_truncated && !stream_err, result.stderr_dropped, "stderr"}})
        if (cut) fprintf(stderr, "sandbox: %s cut at the cap: %llu bytes dropped\n", name, (unsigned long long)dropped);
      if (!result.spool_error.empty()) fprintf(stderr, "sandbox: %s\n", result.spool_error.c_str());
      if (result.fault != cage::Fault::kNone)
        fprintf(stderr, "sandbox: %s: %s\n", cage::FaultName(result.fault), result.reason.c_str());
    }
  } catch (const std::exception& e) {
    // Never reached with the encodings above; if it were, the status stands.
    fprintf(stderr, "sandbox: the result could not be printed (%s); the job's status is %d\n", e.what(), status);
  }
  fflush(stdout);
  return status;
}

// Opens a spool file for the job's output: created or truncated, never
// followed through a symlink, and only a regular file.
int OpenSpoolFile(const char* option, const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    if (fd >= 0 && !S_ISREG(st.st_mode))
      fprintf(stderr, "usage: %s %s: not a regular file (%s)\n", option, path.c_str(), FileKindName(st.st_mode));
    else
      fprintf(stderr, "usage: %s %s: %s\n", option, path.c_str(), strerror(err));
    if (fd >= 0) close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// The byte caps (--stdout-max, --stderr-max): at most kMaxInMemoryCap, or
// kMaxSpooledCap for a stream written to its file. False after one line.
bool SetByteCaps(const std::string& stdout_max, const std::string& stderr_max, const SpoolFiles& spool,
                 cage::RunOptions& options) {
  for (const auto& [option, text, file, file_option, max] :
       {std::tuple{"--stdout-max", &stdout_max, &spool.stdout_path, "--stdout-file", &options.stdout_max},
        {"--stderr-max", &stderr_max, &spool.stderr_path, "--stderr-file", &options.stderr_max}}) {
    std::string why;
    const auto bytes = ParseByteCount(*text, file->empty() ? kMaxInMemoryCap : kMaxSpooledCap, &why);
    if (!bytes) {
      std::string unused;
      const bool needs_file = file->empty() && ParseByteCount(*text, kMaxSpooledCap, &unused);
      fprintf(stderr, "usage: %s: %s%s%s%s\n", option, why.c_str(), needs_file ? " (more needs " : "",
              needs_file ? file_option : "", needs_file ? ")" : "");
      return false;
    }
    *max = static_cast<size_t>(*bytes);
  }
  return true;
}

// --stdout-file and --stderr-file, opened (two different files). False
// after one line.
bool OpenSpoolFiles(const SpoolFiles& spool, cage::RunOptions& options) {
  if (!spool.stdout_path.empty() && spool.stdout_path == spool.stderr_path) {
    fprintf(stderr, "usage: --stdout-file and --stderr-file: the same file %s\n", spool.stdout_path.c_str());
    return false;
  }
  if (!spool.stdout_path.empty() && (options.stdout_fd = OpenSpoolFile("--stdout-file", spool.stdout_path)) < 0)
    return false;
  if (!spool.stderr_path.empty() && (options.stderr_fd = OpenSpoolFile("--stderr-file", spool.stderr_path)) < 0)
    return false;
  return true;
}

// --shm-size: 4K to kMaxShmSize. False after one line.
bool SetShmSize(const std::string& text, cage::RunOptions& options) {
  std::string why;
  const auto shm = ParseByteCount(text, kMaxShmSize, &why);
  if (!shm || *shm < 4096) {
    fprintf(stderr, "usage: --shm-size: %s\n", shm ? "at least 4K" : why.c_str());
    return false;
  }
  options.shm_max = *shm;
  return true;
}

// --stdin relays this process's stdin; --pty relays it too, and the
// caller's terminal (stdin's, else stdout's) gives the job's terminal its
// window size.
void SetInput(bool relay_stdin, cage::RunOptions& options) {
  if (relay_stdin) options.stdin_fd = STDIN_FILENO;
  if (options.pty) {
    options.stdin_fd = STDIN_FILENO;
    options.terminal_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
  }
}

// The job's egress proxy: the public test ranges and (the test-only build's)
// resolver file. False after one line.
bool SetEgress(JobEgressOptions egress, const std::vector<std::string>& test_public, const std::string& test_resolver,
               cage::JobHooks& hooks) {
  for (const auto& r : test_public) {
    auto cidr = egress::ParseTestPublicRange(r);
    if (!cidr.ok()) {
      fprintf(stderr, "usage: --egress-test-public-range %s: %s\n", r.c_str(), cidr.error().what.c_str());
      return false;
    }
    egress.test_public.push_back(cidr.value());
  }
  if (!test_resolver.empty()) egress.resolver = std::make_shared<egress::FileResolver>(test_resolver);
  hooks.egress = std::make_shared<const JobEgressOptions>(std::move(egress));
  return true;
}

}  // namespace

bool RunCommand::Names(const std::string& name) { return name == "run"; }

RunCommand::RunCommand(CLI::App& app) : o_(std::make_shared<Options>()) {
  Options& o = *o_;
  sub_ = app.add_subcommand("run", "Run ARGV supervised: namespaces, process container, verified before exec");
  sub_->add_option("--timeout", o.timeout_s, "Kill the job after S seconds (0: none; else 0.01 to 1e7)")
      ->check(FiniteRange(kMinTimeoutSeconds, kMaxTimeoutSeconds, /*zero_means_none=*/true));
  sub_->add_flag("--json", o.json,
                 "Print the result as JSON (stdout, stderr, exit_code, signal, refused, fault); without it the job's "
                 "output streams to stdout and stderr as it comes");
  sub_->add_flag(
      "--stdin", o.relay_stdin,
      "Relay this process's stdin into the job's (a pipe) until EOF; without it the job's stdin is /dev/null");
  sub_->add_flag("--pty", o.run.pty,
                 "Run the job on a pseudo-terminal of its own (its stdin, stdout, stderr and controlling terminal), "
                 "relayed to this process's stdin and stdout; stdin is relayed, a terminal there is raw meanwhile");
  sub_->add_option("--shm-size", o.shm_size,
                   "Size of the job's private /dev/shm tmpfs (K, M, G suffixes; default 64M, at most 16G; charged to "
                   "the job's cgroup)");
  sub_->add_option("--stdout-max", o.stdout_max,
                   "Keep at most this many bytes of stdout (K, M, G suffixes; default 1M; at most 16M, "
                   "or 1T with --stdout-file)");
  sub_->add_option("--stderr-max", o.stderr_max, "Keep at most this many bytes of stderr (as --stdout-max)");
  sub_->add_option("--stdout-file", o.spool.stdout_path,
                   "Write the job's stdout (up to --stdout-max) to this file; memory and JSON keep its first 64 KiB");
  sub_->add_option("--stderr-file", o.spool.stderr_path, "Write the job's stderr to this file (as --stdout-file)");
  sub_->add_flag("--hard-limits", o.run.hard_limits, "Enforce limits as memory.max and cpu.max (refused where not)");
  sub_->add_flag("--unproven", o.run.unproven,
                 "Run even though the battery attestation does not prove the policy's class here (the result says "
                 "\"unproven (operator override)\")");
  sub_->add_option("--env", o.env, "NAME=VALUE for the job's environment (repeatable)")->allow_extra_args(false);
  AddLandlockAbiMax(sub_, o.abi_cap);
  sub_->add_option("--egress-test-public-range", o.egress_public,
                   "The job's egress proxy treats this CIDR as public; it must lie inside 198.18.0.0/15, the "
                   "benchmarking range no real host uses (the battery's test hosts; repeatable)")
      ->allow_extra_args(false);
  AddTestResolver(sub_, "--egress-test-resolver", o.egress_resolver,
                  "The job's egress proxy answers lookups from this file");
  sub_->add_option("--publish-netns", o.run.publish_netns,
                   "Make a symlink at PATH to the job's network namespace while it runs (for broker --job-netns)");
  sub_->add_option("--egress-max-connections", o.egress.max_connections,
                   "Connections the job may hold through its egress proxy at once (64)")
      ->check(CLI::Range(1, 1 << 20));
  sub_->add_option("policy", o.policy, "Policy JSON file")->required();
  sub_->add_option("argv", o.argv, "Command to run (after --)")->required();
}

std::optional<int> RunCommand::Run() const {
  if (!sub_->parsed()) return std::nullopt;
  const Options& o = *o_;
  cage::RunOptions options = o.run;
  options.timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
  options.landlock_abi_max = o.abi_cap;
  if (!SetByteCaps(o.stdout_max, o.stderr_max, o.spool, options)) return kExitUsage;
  if (!OpenSpoolFiles(o.spool, options)) return kExitUsage;
  if (!ParseEnvOptions(o.env, options.env)) return kExitUsage;
  if (!SetShmSize(o.shm_size, options)) return kExitUsage;
  SetInput(o.relay_stdin, options);
  cage::JobHooks hooks;
  if (!SetEgress(o.egress, o.egress_public, o.egress_resolver, hooks)) return kExitUsage;
  return SupervisedRun(o.policy, o.argv, options, hooks, o.json, o.spool);
}

}  // namespace oarbank
