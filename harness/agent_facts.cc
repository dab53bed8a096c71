#include "harness/agent_facts.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness/battery.h"
#include "harness/probe_spawn.h"

namespace oarbank {
namespace {

constexpr int kReportTimeoutMs = 30000;

std::string EgressAnyUnenforceable(const nlohmann::json& report, const ProbeRun& r) {
  const nlohmann::json* facts = nullptr;
  if (report.is_object() && report.contains("supervisor") && report["supervisor"].is_object() &&
      report["supervisor"].contains("net_egress_any"))
    facts = &report["supervisor"]["net_egress_any"];
  if (facts == nullptr || !facts->is_object())
    return "net.egress-any: sandbox-report said nothing of it (" + r.Summary() + " " + r.stderr_text + ")";
  const std::string status = facts->value("status", "");
  if (status == "enforced") return "";
  return "net.egress-any is " + status + " here (" + facts->value("detail", "") + ")";
}

int SyscallTableEnd(const nlohmann::json& report) {
  const auto table =
      report.is_object() ? report.value("/seccomp/syscall_table"_json_pointer, nlohmann::json()) : nlohmann::json();
  return table.is_object() && table.contains("highest") && table["highest"].is_number_integer()
             ? table["highest"].get<int>()
             : -1;
}

// The numbers in (end, end + kSyscallsAboveScanned] this kernel has: in a
// throw-away child, each called with every argument -1 (a bad descriptor, a
// bad pointer, a bad size), which fails before doing anything; ENOSYS means
// the kernel has no such call. The child writes each answer as it gets it,
// so one that dies on a call cuts the list short there, never lengthens it.
std::string KernelSyscallsAbove(int end) {
  if (end < 0) return "";
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    for (int nr = end + 1; nr <= end + kSyscallsAboveScanned; ++nr) {
      const long ret = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
      const int answer[2] = {nr, ret == -1 && errno == ENOSYS ? 0 : 1};
      if (write(fds[1], answer, sizeof answer) != static_cast<ssize_t>(sizeof answer)) break;
    }
    _exit(0);
  }
  close(fds[1]);
  std::string list;
  int answer[2];
  while (pid > 0 && read(fds[0], answer, sizeof answer) == static_cast<ssize_t>(sizeof answer))
    if (answer[1]) list += (list.empty() ? "" : ",") + std::to_string(answer[0]);
  close(fds[0]);
  if (pid > 0) waitpid(pid, nullptr, 0);
  return list;
}

}  // namespace

AgentFacts AskAgent(const std::string& agent, const std::vector<std::string>& env) {
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin"};
  environment.insert(environment.end(), env.begin(), env.end());
  const ProbeRun r = SpawnProbe({agent, "sandbox-report"}, environment, 0, kReportTimeoutMs);
  const auto report = nlohmann::json::parse(r.stdout_text, nullptr, false);
  AgentFacts facts;
  facts.egress_any_unenforceable = EgressAnyUnenforceable(report, r);
  facts.syscall_table_end = SyscallTableEnd(report);
  facts.kernel_syscalls_above = KernelSyscallsAbove(facts.syscall_table_end);
  const auto landlock =
      report.is_object() ? report.value("/landlock"_json_pointer, nlohmann::json()) : nlohmann::json();
  if (landlock.is_object() && landlock.contains("abi") && landlock["abi"].is_number_integer())
    facts.landlock_abi = landlock["abi"].get<int>();
  if (landlock.is_object() && landlock.contains("missing") && landlock["missing"].is_string())
    facts.landlock_missing = landlock["missing"].get<std::string>();
  return facts;
}

}  // namespace oarbank
