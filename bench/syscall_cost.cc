// syscall_cost: what the launcher's seccomp filter costs a hot syscall.
//
// Times getppid() and read(/dev/zero, 1 byte) in a tight loop, in forked
// children: once with no filter, once after loading exactly the seccomp rows
// PlanConfinement selects for a strict runner policy (net none, no broker,
// exec_writable false), and once after ConfineSelf (the whole cage: Landlock,
// capabilities, mount namespace and the same filter). The rounds are
// interleaved (none, seccomp, cage, none, ...) so that drift on a shared VM
// hits every mode alike; the best and the median round are reported.
//
// Neither syscall is in the rule table, so the kernel's per-syscall "always
// allow" cache (5.11+) should keep them off the BPF program: the expected
// cost is only the flat seccomp entry overhead.
//
// Exit status: 0 every ratio within the target, 3 a ratio above it, 1 the
// benchmark itself failed (a control did not hold, a step failed).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/unique_fd.h"
#include "sandbox/host/host_facts.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"
#include "sandbox/policy/policy.h"

namespace oarbank {
namespace {

enum class Mode { kNone, kSeccomp, kCage };
const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kNone: return "no filter";
    case Mode::kSeccomp: return "seccomp (planner rows)";
    case Mode::kCage: return "ConfineSelf (whole cage)";
  }
  return "?";
}

enum Call { kGetppid, kRead, kCalls };
const char* const kCallNames[kCalls] = {"getppid()", "read(/dev/zero, 1)"};

// Fixed size: sent from the forked child over a pipe.
struct Round {
  int ok = 0;
  double ns[kCalls] = {};
  char error[240] = {};
};

void SetError(Round& r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void SetError(Round& r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r.error, sizeof r.error, fmt, ap);
  va_end(ap);
  r.ok = 0;
}

double NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double TimeGetppid(long iterations) {
  const double start = NowNs();
  for (long i = 0; i < iterations; ++i) syscall(SYS_getppid);
  return (NowNs() - start) / static_cast<double>(iterations);
}

double TimeRead(int fd, long iterations) {
  char byte;
  const double start = NowNs();
  for (long i = 0; i < iterations; ++i) {
    if (read(fd, &byte, 1) != 1) return -1;
  }
  return (NowNs() - start) / static_cast<double>(iterations);
}

// The launcher's own seccomp step, after no_new_privs as in the launcher.
bool LoadSeccompRows(const std::vector<SeccompRule>& rules, Round& r) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    SetError(r, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
    return false;
  }
  if (auto failure = ApplySeccomp(rules)) {
    SetError(r, "%s", StepFailureLine(*failure).c_str());
    return false;
  }
  return true;
}

// "Seccomp:" from /proc/self/status: 0 none, 2 filter.
int SeccompMode() {
  FILE* f = fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  int mode = -1;
  while (fgets(line, sizeof line, f) != nullptr)
    if (sscanf(line, "Seccomp: %d", &mode) == 1) break;
  fclose(f);
  return mode;
}

// Runs in the forked child: confine per mode, prove it (positive and
// negative control), then time.
Round MeasureInChild(Mode mode, const Plan& plan, int zero_fd, long iterations) {
  Round r;
  switch (mode) {
    case Mode::kNone: break;
    case Mode::kSeccomp:
      if (!LoadSeccompRows(plan.seccomp, r)) return r;
      break;
    case Mode::kCage:
      if (auto failure = ConfineSelf(plan)) {
        SetError(r, "%s", StepFailureLine(*failure).c_str());
        return r;
      }
      break;
  }
  // Control: listen(-1) is EBADF unconfined and EPERM under the filter
  // ("never listening"), so the filter is really loaded, or really absent.
  const long rc = syscall(SYS_listen, -1, 0);
  const int err = errno;
  const int want = mode == Mode::kNone ? EBADF : EPERM;
  if (rc != -1 || err != want) {
    SetError(r, "control: listen(-1, 0) gave %ld (%s), expected %s", rc, rc == -1 ? strerror(err) : "no error",
             strerror(want));
    return r;
  }
  const int seccomp_mode = SeccompMode();
  if (seccomp_mode != (mode == Mode::kNone ? 0 : 2)) {
    SetError(r, "control: /proc/self/status Seccomp: %d", seccomp_mode);
    return r;
  }
  // The hot calls must still work under the filter.
  char byte = 1;
  if (syscall(SYS_getppid) <= 0 || read(zero_fd, &byte, 1) != 1 || byte != 0) {
    SetError(r, "control: getppid or read(/dev/zero) failed under %s: %s", ModeName(mode), strerror(errno));
    return r;
  }
  // Warm up (caches, branch predictors, CPU frequency) before timing.
  TimeGetppid(iterations / 20 + 1);
  TimeRead(zero_fd, iterations / 20 + 1);
  r.ns[kGetppid] = TimeGetppid(iterations);
  r.ns[kRead] = TimeRead(zero_fd, iterations);
  if (r.ns[kRead] < 0) {
    SetError(r, "read(/dev/zero) failed: %s", strerror(errno));
    return r;
  }
  r.ok = 1;
  return r;
}

Round RunRound(Mode mode, const Plan& plan, int zero_fd, long iterations) {
  int fds[2];
  Round r;
  if (pipe2(fds, O_CLOEXEC) != 0) {
    SetError(r, "pipe: %s", strerror(errno));
    return r;
  }
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    SetError(r, "fork: %s", strerror(errno));
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    const Round result = MeasureInChild(mode, plan, zero_fd, iterations);
    const bool sent = write(fds[1], &result, sizeof result) == static_cast<ssize_t>(sizeof result);
    _exit(sent ? 0 : 1);
  }
  close(fds[1]);
  const ssize_t n = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != static_cast<ssize_t>(sizeof r)) {
    r = Round{};
    if (WIFSIGNALED(status))
      SetError(r, "child killed by signal %d", WTERMSIG(status));
    else
      SetError(r, "child exited %d without a result", WEXITSTATUS(status));
  }
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The strict runner policy: every directory a runner may have, net none, no
// broker, exec_writable false (so the memfd/execveat rows apply too).
std::string StrictRunnerPolicy(const std::string& root) {
  return R"({"contract": 1, "role": "runner", "bundle": ")" + root + R"(/bundle", "work": ")" + root +
         R"(/work", "data": ")" + root + R"(/data", "tmp": ")" + root +
         R"(/work/tmp", "net": {"mode": "none"}, "exec_writable": false})";
}

void Usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--iterations N] [--repeats R] [--target RATIO] [--no-cage]\n"
          "  N calls per timed loop (default 5000000), R interleaved rounds per mode\n"
          "  (default 5, best and median reported), target for filtered/unfiltered (default 1.4)\n",
          argv0);
}

struct Args {
  long iterations = 5'000'000;
  int repeats = 5;
  double target = 1.4;
  bool cage = true;
};

// The command line, or the exit code to leave with (usage printed).
std::optional<int> ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--iterations" && has_value)
      args.iterations = atol(argv[++i]);
    else if (a == "--repeats" && has_value)
      args.repeats = atoi(argv[++i]);
    else if (a == "--target" && has_value)
      args.target = atof(argv[++i]);
    else if (a == "--no-cage")
      args.cage = false;
    else {
      Usage(argv[0]);
      return a == "-h" || a == "--help" ? 0 : 64;
    }
  }
  if (args.iterations < 1000 || args.repeats < 1 || !(args.target > 0)) {
    Usage(argv[0]);
    return 64;
  }
  return std::nullopt;
}

// A temporary directory holding the policy's grants, removed on destruction.
struct GrantTree {
  std::string root;
  ~GrantTree() {
    std::error_code ec;
    if (!root.empty()) std::filesystem::remove_all(root, ec);
  }
  bool Make() {
    const char* tmpdir = getenv("TMPDIR");
    std::string templ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/oarbank-syscall-cost.XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) {
      fprintf(stderr, "syscall_cost: mkdtemp %s: %s\n", templ.c_str(), strerror(errno));
      return false;
    }
    root = templ;
    for (const char* sub : {"/bundle", "/work", "/work/tmp", "/data"}) {
      if (mkdir((root + sub).c_str(), 0700) != 0) {
        fprintf(stderr, "syscall_cost: mkdir %s%s: %s\n", root.c_str(), sub, strerror(errno));
        return false;
      }
    }
    return true;
  }
};

// The table of timings, each mode against the unfiltered baseline of the
// same round set; whether the filter met the target.
bool PrintTable(const std::vector<Mode>& modes, const std::vector<std::vector<double>>& ns, const Args& args) {
  bool all_pass = true;
  printf("\n| syscall | mode | best ns | median ns | ratio best | ratio median | target <= %.2fx |\n", args.target);
  printf("|---|---|---|---|---|---|---|\n");
  for (int c = 0; c < kCalls; ++c) {
    const double base_best = *std::min_element(ns[c].begin(), ns[c].end());
    const double base_median = Median(ns[c]);
    for (size_t m = 0; m < modes.size(); ++m) {
      const auto& v = ns[m * kCalls + c];
      const double best = *std::min_element(v.begin(), v.end());
      const double median = Median(v);
      const double ratio_best = best / base_best;
      const double ratio_median = median / base_median;
      std::string verdict = "-";
      if (modes[m] != Mode::kNone) {
        const bool pass = ratio_best <= args.target;
        // The target is on the filter; the whole cage is informational.
        if (modes[m] == Mode::kSeccomp) all_pass = all_pass && pass;
        verdict = pass ? "PASS" : "MISS";
        if (modes[m] == Mode::kCage) verdict += " (info)";
      }
      printf("| %s | %s | %.1f | %.1f | %.2fx | %.2fx | %s |\n", kCallNames[c], ModeName(modes[m]), best, median,
             ratio_best, ratio_median, verdict.c_str());
    }
  }
  printf("\nseccomp target (filtered/unfiltered, best of %d <= %.2fx): %s\n", args.repeats, args.target,
         all_pass ? "PASS" : "MISS");
  return all_pass;
}

int Main(int argc, char** argv) {
  Args args;
  if (auto exit_code = ParseArgs(argc, argv, args)) return *exit_code;
  GrantTree tree;
  if (!tree.Make()) return 1;
  auto policy = ParsePolicy(StrictRunnerPolicy(tree.root));
  if (!policy.ok()) {
    fprintf(stderr, "syscall_cost: %s\n", PolicyErrorLine(policy.error()).c_str());
    return 1;
  }
  const HostFacts host = ProbeHost();
  const Plan plan = PlanConfinement(policy.value(), host);
  bool args_on_hot = false;
  for (const auto& rule : plan.seccomp)
    if (rule.syscall == "getppid" || rule.syscall == "read") args_on_hot = true;
  if (args.cage && plan.placement.verdict != Verdict::kOk) {
    fprintf(stderr, "syscall_cost: placement is not ok on this host (%s); skipping the whole-cage mode\n",
            VerdictName(plan.placement.verdict));
    args.cage = false;
  }
  const UniqueFd zero(open("/dev/zero", O_RDONLY | O_CLOEXEC));
  if (!zero.valid()) {
    fprintf(stderr, "syscall_cost: open /dev/zero: %s\n", strerror(errno));
    return 1;
  }
  std::vector<Mode> modes = {Mode::kNone, Mode::kSeccomp};
  if (args.cage) modes.push_back(Mode::kCage);
  std::vector<std::vector<double>> ns(modes.size() * kCalls);  // [mode * kCalls + call]
  printf(
      "syscall cost: uid %u, kernel %s, %zu seccomp rows (strict runner policy)%s,\n"
      "%ld calls per loop, %d interleaved rounds per mode\n",
      getuid(), host.kernel_release.c_str(), plan.seccomp.size(),
      args_on_hot ? " -- WARNING: a row names getppid or read" : "", args.iterations, args.repeats);
  fflush(stdout);
  for (int round = 0; round < args.repeats; ++round) {
    for (size_t m = 0; m < modes.size(); ++m) {
      const Round r = RunRound(modes[m], plan, zero.get(), args.iterations);
      if (!r.ok) {
        fprintf(stderr, "syscall_cost: %s: %s\n", ModeName(modes[m]), r.error);
        return 1;
      }
      for (int c = 0; c < kCalls; ++c) ns[m * kCalls + c].push_back(r.ns[c]);
    }
  }
  return PrintTable(modes, ns, args) ? 0 : 3;
}

}  // namespace
}  // namespace oarbank

int main(int argc, char** argv) { return oarbank::Main(argc, argv); }
