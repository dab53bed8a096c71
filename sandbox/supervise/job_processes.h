// The job's processes, apart from the supervisor's state of the job
// (supervisor.cc): the keeper (the supervisor's child, in the host's
// namespaces: writes init's id maps, joins the cgroup leaf, reports what
// is left), init (pid 1 of the job's namespaces: reaps, serves the proxy
// listener and the job network's setup) and the launcher (confines
// itself, waits at the gate, becomes the module). Everything they need is
// prepared before the fork (ChildPlan, JobFds): after it they make system
// calls only and allocate nothing.
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/plan/plan.h"
#include "sandbox/supervise/cgroup.h"
#include "sandbox/supervise/namespaces.h"

namespace oarbank::cage {

// Setup that takes longer than this is refused (a wedged kernel, not a job).
constexpr auto kSetupDeadline = std::chrono::seconds(60);

// keeper and init -> supervisor, over the status pipe. Fixed size, well
// under PIPE_BUF, so each write is atomic and nothing is allocated.
enum class Record : int32_t { kInitPid = 1, kSetupFailed, kModuleExit, kClosed };
struct StatusRecord {
  Record kind;
  int32_t value;  // init's pid; the module's wait status; oom kills
  int32_t err;
  char stage[32];
  char detail[160];
};

// launcher -> supervisor, on the gate socket instead of kGateReady when a
// step fails, or after kGateGo when exec fails.
constexpr char kGateFailed = 'F';
struct GateFailure {
  char tag = kGateFailed;
  char stage[32] = {};
  int32_t err = 0;
  char detail[200] = {};
};

// The fds the job's processes keep; the numbers survive the forks.
struct JobFds {
  int status_w = -1;    // keeper, init -> supervisor
  int gate_child = -1;  // the launcher's end of the gate
  int sync_r = -1;      // keeper -> init: maps written, cgroup joined
  int sync_w = -1;
  int out_w = -1;
  int err_w = -1;
  int devnull = -1;
  int root_etc_tree = -1;  // keeper -> launcher: root's idmapped /etc (root_etc.h)
  int broker = -1;         // the module's broker connection (kJobBrokerFd in the launcher)
  int egress_child = -1;   // init -> supervisor: the proxy listener (job_egress.h)
  int net_child = -1;      // init <-> supervisor: egress-any's job network (job_network.h)
  int stdin_r = -1;        // the job's stdin when the caller's is relayed (else /dev/null)
  int trace_r = -1;        // --explain: the keeper waits here until its tracer is attached (job_trace.h)
};

// Everything the job's processes need, prepared before the fork: after it
// they only make system calls.
struct ChildPlan {
  const Plan* plan = nullptr;
  int clone_flags = 0;
  IdMaps maps;
  const CgroupLeaf* leaf = nullptr;
  int root_etc_idmap_fd = -1;  // root's /etc view (RootEtcView::idmap), for a plan with root_etc_view
  // The probe's proof copy of that view (RootEtcView::proof_tree), where
  // this job mounts it: the keeper then makes no copy of its own. -1 else.
  int root_etc_tree_fd = -1;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  std::optional<uid_t> run_as_uid;
  std::optional<gid_t> run_as_gid;
  pid_t supervisor = 0;
  uint64_t ignored_signals = 0;    // the agent's SIG_IGN set (exec keeps it)
  int egress_port = -1;            // egress-allowlist: init listens on 127.0.0.1:<port> in the job's netns
  bool pty = false;                // the launcher opens the job's terminal (job_devices.h)
  bool loopback_up = false;        // ipc "job": init brings up the job's loopback (no listener of its own)
  bool init_not_dumpable = false;  // debug: no process of the job may trace or read its init
};

// The signals this process ignores (SigIgn in /proc/self/status): exec
// resets handlers but keeps SIG_IGN, so the launcher resets exactly these.
uint64_t IgnoredSignals();

// The keeper: forks init into the job's namespaces, then waits for it.
// Never returns.
[[noreturn]] void KeeperMain(const ChildPlan& cp, const JobFds& f);

}  // namespace oarbank::cage
