// bench/run_policy_driver: a job as a long-lived agent starts it, in the
// process that measures it. bench/supervise.sh and bench/run_policy_stages.sh
// drive it.
//
//   run_policy_driver --attest POLICY PATH
//       writes an attestation bound to this binary for POLICY's class, so
//       that the gate's read and check of it are in every timed job (this
//       driver is its own launcher);
//   run_policy_driver POLICY ROUNDS BWRAP_ARGV...
//       ROUNDS interleaved triples (after 10 that warm up): cage::RunPolicy
//       of /bin/true with the attestation named by OARBANK_INPROC_ATTESTATION,
//       then fork+exec+wait of /bin/true, then of BWRAP_ARGV. Prints the
//       medians and minimums in ms: run bare bwrap run_min bare_min bwrap_min.
//       With OARBANK_DRIVER_MARKS=FILE it also writes one line per timed
//       round to FILE: the CLOCK_MONOTONIC nanoseconds at which each of the
//       three began and ended (run_begin run_end bare_begin bare_end
//       bwrap_begin bwrap_end), the clock `perf record -k CLOCK_MONOTONIC`
//       stamps its events with.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sandbox/plan/attestation.h"
#include "sandbox/supervise/supervisor.h"

namespace {

using oarbank::cage::RunOptions;

constexpr int kWarmUp = 10;

long long Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

// fork+exec+wait; true on exit 0.
bool Spawn(char* const argv[]) {
  const pid_t pid = fork();
  if (pid == 0) {
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// The policy at `path`, or the line that says why not (on stderr).
oarbank::Expected<oarbank::Policy> Load(const char* path) {
  auto policy = oarbank::LoadPolicyFile(path);
  if (!policy.ok()) fprintf(stderr, "run_policy_driver: %s\n", oarbank::PolicyErrorLine(policy.error()).c_str());
  return policy;
}

int Attest(const char* policy_path, const char* out) {
  auto policy = Load(policy_path);
  if (!policy.ok()) return 1;
  oarbank::Attestation a;
  a.binding = oarbank::BindingForThisProcess(oarbank::ProbeHost());
  a.proven_classes = {oarbank::PolicyClass(policy.value())};
  const std::string why = oarbank::WriteAttestation(out, a);
  if (!why.empty()) fprintf(stderr, "run_policy_driver: %s\n", why.c_str());
  return why.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--attest") return Attest(argv[2], argv[3]);
  const int rounds = argc >= 4 ? atoi(argv[2]) : 0;
  const char* attestation = getenv("OARBANK_INPROC_ATTESTATION");
  if (rounds < 1 || rounds > 100000 || attestation == nullptr) {
    fprintf(stderr,
            "usage: run_policy_driver --attest POLICY PATH\n"
            "       OARBANK_INPROC_ATTESTATION=PATH run_policy_driver POLICY ROUNDS(1-100000) BWRAP_ARGV...\n");
    return 64;
  }
  auto policy = Load(argv[1]);
  if (!policy.ok()) return 1;
  FILE* marks = nullptr;
  if (const char* path = getenv("OARBANK_DRIVER_MARKS")) {
    marks = fopen(path, "we");
    if (marks == nullptr) {
      perror(path);
      return 1;
    }
  }
  char* bare_argv[] = {const_cast<char*>("/bin/true"), nullptr};
  char* const* bwrap_argv = argv + 3;  // argv ends in nullptr
  RunOptions o;
  o.cwd = "/";
  o.attestation_path = attestation;
  std::vector<double> run, bare, bwrap;
  for (int i = 0; i < rounds + kWarmUp; ++i) {
    const long long t0 = Now();
    const auto r = oarbank::cage::RunPolicy(policy.value(), {"/bin/true"}, o);
    const long long t1 = Now();
    if (r.exit_code != 0) {
      fprintf(stderr, "run_policy_driver: run: %s %s\n", oarbank::cage::FaultName(r.fault), r.reason.c_str());
      return 1;
    }
    if (!Spawn(bare_argv)) {
      fprintf(stderr, "run_policy_driver: /bin/true failed\n");
      return 1;
    }
    const long long t2 = Now();
    if (!Spawn(bwrap_argv)) {
      fprintf(stderr, "run_policy_driver: %s failed\n", bwrap_argv[0]);
      return 1;
    }
    const long long t3 = Now();
    if (i < kWarmUp) continue;
    run.push_back((t1 - t0) / 1e6);
    bare.push_back((t2 - t1) / 1e6);
    bwrap.push_back((t3 - t2) / 1e6);
    if (marks != nullptr) fprintf(marks, "%lld %lld %lld %lld %lld %lld\n", t0, t1, t1, t2, t2, t3);
  }
  if (marks != nullptr && fclose(marks) != 0) {
    perror("run_policy_driver: marks");
    return 1;
  }
  printf("%.3f %.3f %.3f %.3f %.3f %.3f\n", Median(run), Median(bare), Median(bwrap), Min(run), Min(bare), Min(bwrap));
  return 0;
}
