#include "sandbox/supervise/namespaces.h"

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/write_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <mutex>

namespace oarbank {
namespace {

constexpr int kBaseFlags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWNET;
constexpr char kHostname[] = "oarbank";
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;  // CLONE_INTO_CGROUP, linux/sched.h (Linux 5.7)

int WriteProcFile(pid_t pid, const char* name, const char* text) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), name);
  return WriteWholeFile(path, text);
}

}  // namespace

std::string NamespacePlan::Names() const { return "user,pid,ipc,uts,mnt,net"; }

NamespacePlan PlanJobNamespaces(const Policy& policy) {
  NamespacePlan plan;
  plan.clone_flags = kBaseFlags;
  switch (policy.net().mode) {
    case NetMode::kNone:
      plan.net_detail = "empty network namespace (net none), on top of the seccomp socket rules";
      break;
    case NetMode::kEgressAllowlist:
      plan.egress_listener = true;
      plan.net_detail =
          "network namespace of its own (egress-allowlist): lo only, no route out; its one listener, "
          "127.0.0.1:" +
          std::to_string(policy.net().proxy_port) +
          ", is served by the agent's egress proxy, which connects out from the agent's own network "
          "namespace; Landlock limits TCP to that port";
      break;
    case NetMode::kEgressAny:
      plan.job_network = true;
      plan.net_detail =
          "network namespace of its own (egress-any): its only way out is slirp4netns, run by the "
          "agent; an nftables ruleset installed before the launcher drops every destination that is "
          "not public but the stack's resolver, and everything inbound but replies (job_network.h)";
      break;
  }
  return plan;
}

IdMaps PlanIdMaps(uid_t uid, gid_t gid, std::optional<uid_t> run_as_uid, std::optional<gid_t> run_as_gid) {
  IdMaps maps;
  maps.uid_map = std::to_string(uid) + " " + std::to_string(uid) + " 1\n";
  maps.gid_map = std::to_string(gid) + " " + std::to_string(gid) + " 1\n";
  // Only a writer with CAP_SETUID/CAP_SETGID outside may map more than
  // itself, and only then may the job's init keep setgroups (to clear the
  // supplementary groups before it switches to run_as).
  if (uid == 0) {
    maps.deny_setgroups = false;
    if (run_as_uid && *run_as_uid != uid)
      maps.uid_map += std::to_string(*run_as_uid) + " " + std::to_string(*run_as_uid) + " 1\n";
    if (run_as_gid && *run_as_gid != gid)
      maps.gid_map += std::to_string(*run_as_gid) + " " + std::to_string(*run_as_gid) + " 1\n";
  }
  return maps;
}

pid_t CloneIntoNamespaces(int clone_flags, int cgroup_fd, bool* placed) {
  if (placed != nullptr) *placed = false;
  if (cgroup_fd >= 0) {
    // clone_args as of Linux 5.7 (the 6.1 headers' struct, spelled out so
    // that the size passed is the one this code fills).
    struct {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
    } args{};
    args.flags = static_cast<uint64_t>(static_cast<unsigned>(clone_flags)) | kCloneIntoCgroup;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) {
      if (pid > 0 && placed != nullptr) *placed = true;
      return static_cast<pid_t>(pid);
    }
    // Older kernels (no clone3, no CLONE_INTO_CGROUP) and a cgroup this
    // process may not clone into alike: the plain clone below, whose own
    // failure is the one to report, and the caller moves the child.
  }
  // fork-like: no new stack, SIGCHLD to the parent when the child ends.
  return static_cast<pid_t>(
      syscall(SYS_clone, static_cast<unsigned long>(clone_flags) | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
}

int WriteIdMapsFromParent(pid_t pid, const IdMaps& maps, const char** what) {
  if (maps.deny_setgroups) {
    *what = "setgroups";
    if (int err = WriteProcFile(pid, "setgroups", "deny")) return err;
  }
  *what = "uid_map";
  if (int err = WriteProcFile(pid, "uid_map", maps.uid_map.c_str())) return err;
  *what = "gid_map";
  return WriteProcFile(pid, "gid_map", maps.gid_map.c_str());
}

int SetUpInitInChild(const char** what) {
  // Nothing mounted here may propagate back to the host.
  *what = "mount --make-rprivate /";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  // A /proc of this pid namespace: the job sees its own processes only.
  *what = "mount proc /proc";
  if (!FaultSkipStep("job-proc") &&  // test-only build (common/fault_hooks.h)
      mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno;
  *what = "sethostname";
  if (sethostname(kHostname, sizeof kHostname - 1) != 0) return errno;
  return 0;
}

const NamespaceProbe& ProbeJobNamespaces() {
  static NamespaceProbe probe;
  static std::once_flag once;
  std::call_once(once, [] {
    struct Report {
      int err;
      char what[96];
    };
    int report_pipe[2];
    if (pipe2(report_pipe, O_CLOEXEC) != 0) {
      probe.detail = std::string("pipe: ") + strerror(errno);
      return;
    }
    // fork first: the raw clone below then runs in a single-threaded copy.
    const pid_t outer = fork();
    if (outer == 0) {
      close(report_pipe[0]);
      Report report{};
      int sync[2];
      if (pipe2(sync, O_CLOEXEC) != 0) _exit(1);
      const pid_t init = CloneIntoNamespaces(kBaseFlags);
      if (init == 0) {
        // The job's init: wait until the maps are written, then set up.
        close(sync[1]);
        char go;
        while (read(sync[0], &go, 1) < 0 && errno == EINTR) {
        }
        const char* what = "";
        const int err = SetUpInitInChild(&what);
        _exit(err == 0 ? 0 : 100 + (err & 0x7f));
      }
      close(sync[0]);
      if (init < 0) {
        report.err = errno;
        snprintf(report.what, sizeof report.what, "clone(CLONE_NEWUSER|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWNS)");
      } else {
        const char* what = "";
        report.err = WriteIdMapsFromParent(init, PlanIdMaps(getuid(), getgid(), std::nullopt, std::nullopt), &what);
        if (report.err != 0) {
          snprintf(report.what, sizeof report.what, "write /proc/<pid>/%s", what);
          kill(init, SIGKILL);
        }
        close(sync[1]);
        int status = 0;
        while (waitpid(init, &status, 0) < 0 && errno == EINTR) {
        }
        if (report.err == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          report.err = WIFEXITED(status) && WEXITSTATUS(status) >= 100 ? WEXITSTATUS(status) - 100 : EIO;
          snprintf(report.what, sizeof report.what, "mount a fresh /proc in the new pid namespace");
        }
      }
      (void)!write(report_pipe[1], &report, sizeof report);
      _exit(0);
    }
    close(report_pipe[1]);
    if (outer < 0) {
      probe.detail = std::string("fork: ") + strerror(errno);
      close(report_pipe[0]);
      return;
    }
    Report report{};
    const ssize_t n = read(report_pipe[0], &report, sizeof report);
    close(report_pipe[0]);
    while (waitpid(outer, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (n != static_cast<ssize_t>(sizeof report)) {
      probe.detail = "the namespace probe ended without a report";
    } else if (report.err != 0) {
      probe.detail = std::string(report.what) + ": " + strerror(report.err);
    } else {
      probe.ok = true;
      probe.detail = "available";
    }
  });
  return probe;
}

}  // namespace oarbank
