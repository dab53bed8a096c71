#include "sandbox/seccomp/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>

namespace oarbank {
namespace {

constexpr uint64_t kLow32 = 0xffffffffull;
constexpr uint64_t kSockTypeMask = 0xf;
constexpr uint64_t kSeccompSetModeFilter = 1;
constexpr uint64_t kSeccompFilterFlagNewListener = 1ull << 3;
constexpr uint64_t kPersonalityQueryBit = 1ull << 31;
constexpr uint64_t kIoprioWhoProcess = 1;
constexpr uint64_t kRenameWhiteout = 1ull << 2;  // RENAME_WHITEOUT, linux/fs.h

ArgCmp Eq(unsigned arg, uint64_t v) { return {arg, CmpOp::kEq, v}; }
ArgCmp Ge(unsigned arg, uint64_t v) { return {arg, CmpOp::kGe, v}; }
ArgCmp Ne(unsigned arg, uint64_t v) { return {arg, CmpOp::kNe, v}; }
ArgCmp Masked(unsigned arg, uint64_t mask, uint64_t v) { return {arg, CmpOp::kMaskedEq, v, mask}; }

std::vector<SeccompRule> BuildTable() {
  std::vector<SeccompRule> t = {
      // Local IPC: the broker is the only channel (the Linux backend).
      {"socket",
       {Eq(0, AF_UNIX)},
       EPERM,
       When::kNoBroker,
       "no unix socket unless the broker is reached by path (Landlock ABI 9): a pathname or abstract socket "
       "reaches the agent's session (systemd-run --user, docker.sock); stream socketpairs stay for event loops, and "
       "below ABI 9 the broker is an inherited connection"},
      // A datagram pair is unconnected enough to leave: sendto() names any
      // pathname or abstract address, and connect() re-targets it. Stream
      // and seqpacket pairs ignore or refuse an address and stay. The unix
      // family makes SOCK_RAW a datagram socket, so it is refused alike.
      {"socketpair",
       {Eq(0, AF_UNIX), Masked(1, kSockTypeMask, SOCK_DGRAM)},
       EPERM,
       When::kNoBroker,
       "no unix datagram pair unless the broker is reached by path (Landlock ABI 9): sendto() and connect() "
       "on one reach a host socket like socket(AF_UNIX) would"},
      {"socketpair",
       {Eq(0, AF_UNIX), Masked(1, kSockTypeMask, SOCK_RAW)},
       EPERM,
       When::kNoBroker,
       "no unix SOCK_RAW pair: the kernel makes it a datagram pair"},
      {"socketpair",
       {Ne(0, AF_UNIX)},
       EPERM,
       When::kAlways,
       "pairs of unix sockets only: other families (TIPC) would load kernel modules past the socket() rows"},
      {"socket", {Eq(0, AF_INET)}, EPERM, When::kNetNone, "net.mode none: no IPv4"},
      {"socket", {Eq(0, AF_INET6)}, EPERM, When::kNetNone, "net.mode none: no IPv6"},
      {"listen", {}, EPERM, When::kNoJobIpc, "never listening"},
      {"bind", {}, EPERM, When::kNoJobIpc, "never listening: no address of its own, on any family"},

      // System V IPC and POSIX message queues live in the host's IPC
      // namespace and are reached by key or id, not by path: a channel to
      // any process of the same uid that Landlock does not see.
      {"shmget", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"shmat", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"shmctl", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"semget", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"semop", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"semtimedop", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"semctl", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"msgget", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"msgsnd", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"msgrcv", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"msgctl", {}, EPERM, When::kAlways, "no System V IPC: shared with the host"},
      {"mq_open", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},
      {"mq_unlink", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},
      {"mq_timedsend", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},
      {"mq_timedreceive", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},
      {"mq_notify", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},
      {"mq_getsetattr", {}, EPERM, When::kAlways, "no POSIX message queues: shared with the host"},

      // io_uring performs socket, connect and openat without those syscalls.
      {"io_uring_setup", {}, EPERM, When::kAlways, "io_uring bypasses syscall filtering"},
      {"io_uring_enter", {}, EPERM, When::kAlways, "io_uring bypasses syscall filtering"},
      {"io_uring_register", {}, EPERM, When::kAlways, "io_uring bypasses syscall filtering"},

      // Other processes.
      // debug: the job's own processes only, in its own pid namespace (its
      // init not dumpable); pidfd_getfd and kcmp stay refused.
      {"ptrace", {}, EPERM, When::kNoDebug, "no tracing of any process"},
      {"process_vm_readv", {}, EPERM, When::kNoDebug, "no reading another process's memory"},
      {"process_vm_writev", {}, EPERM, When::kNoDebug, "no writing another process's memory"},
      {"pidfd_getfd", {}, EPERM, When::kAlways, "no stealing another process's file descriptors"},
      {"kcmp", {}, EPERM, When::kAlways, "no probing another process's file table"},

      // Namespaces and mounts: children inherit the cage and cannot leave it.
      {"unshare", {}, EPERM, When::kAlways, "no new namespaces"},
      {"setns", {}, EPERM, When::kAlways, "no joining other namespaces"},
      {"clone3",
       {},
       ENOSYS,
       When::kAlways,
       "clone3 passes flags in memory the filter cannot read; ENOSYS makes libc fall back to clone"},
      {"mount", {}, EPERM, When::kAlways, "no mounts"},
      {"umount2", {}, EPERM, When::kAlways, "no unmounting the noexec binds"},
      {"pivot_root", {}, EPERM, When::kAlways, "no mounts"},
      {"chroot", {}, EPERM, When::kAlways, "no root changes"},
      {"fchroot", {}, EPERM, When::kAlways, "no root changes, by descriptor either (Linux 7.3)"},
      {"fsopen", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"fsconfig", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"fsmount", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"fspick", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"move_mount", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"open_tree", {}, EPERM, When::kAlways, "new mount API bypasses a mount() deny"},
      {"open_tree_attr", {}, EPERM, When::kAlways, "open_tree that also sets mount attributes (Linux 6.15)"},
      {"mount_setattr", {}, EPERM, When::kAlways, "no clearing noexec on the writable grants"},

      // Kernel attack surface.
      {"bpf", {}, EPERM, When::kAlways, "no eBPF programs or maps"},
      {"add_key", {}, EPERM, When::kAlways, "keyrings are shared beyond the sandbox"},
      {"request_key", {}, EPERM, When::kAlways, "keyrings are shared beyond the sandbox"},
      {"keyctl", {}, EPERM, When::kAlways, "keyrings are shared beyond the sandbox"},
      {"init_module", {}, EPERM, When::kAlways, "no kernel modules"},
      {"finit_module", {}, EPERM, When::kAlways, "no kernel modules"},
      {"delete_module", {}, EPERM, When::kAlways, "no kernel modules"},
      {"kexec_load", {}, EPERM, When::kAlways, "no kernel replacement"},
      {"kexec_file_load", {}, EPERM, When::kAlways, "no kernel replacement"},
      {"perf_event_open", {}, EPERM, When::kAlways, "perf events observe other processes and the kernel"},
      {"userfaultfd", {}, EPERM, When::kAlways, "userfaultfd widens kernel race windows"},
      {"open_by_handle_at", {}, EPERM, When::kAlways, "file handles bypass path-based rules"},
      {"syslog", {}, EPERM, When::kAlways, "no reading the kernel log"},
      {"uselib", {}, EPERM, When::kAlways, "legacy loader maps files outside exec checks"},

      // Extended attributes by path: Landlock has no hook on reading them,
      // so they would show the user.* data of files outside the grants.
      // EOPNOTSUPP is what ls, cp and Python take for "no attributes here";
      // fgetxattr and flistxattr on a file the module could open stay.
      {"getxattr", {}, EOPNOTSUPP, When::kAlways, "no reading extended attributes by path"},
      {"lgetxattr", {}, EOPNOTSUPP, When::kAlways, "no reading extended attributes by path"},
      {"getxattrat", {}, EOPNOTSUPP, When::kAlways, "no reading extended attributes by path"},
      {"listxattr", {}, EOPNOTSUPP, When::kAlways, "no listing extended attributes by path"},
      {"llistxattr", {}, EOPNOTSUPP, When::kAlways, "no listing extended attributes by path"},
      {"listxattrat", {}, EOPNOTSUPP, When::kAlways, "no listing extended attributes by path"},
      // Bit 31 is never set by a real persona but is by the query 0xffffffff,
      // which must keep working.
      {"personality",
       {Masked(0, kPersonalityQueryBit | READ_IMPLIES_EXEC, READ_IMPLIES_EXEC)},
       EPERM,
       When::kAlways,
       "READ_IMPLIES_EXEC would make readable mappings executable"},

      // Other processes of the same uid outside the cage: uid checks alone
      // allow these, and Landlock has no hook for them (a pid namespace
      // would hide the targets; the launcher alone has none). Only the
      // calling process itself (pid/who 0) may be named.
      {"prlimit64", {Ne(0, 0)}, EPERM, When::kAlways, "no setting another process's limits (RLIMIT_CPU kills it)"},
      {"setpriority",
       {Ne(0, PRIO_PROCESS)},
       EPERM,
       When::kAlways,
       "no renicing a process group or every process of the uid"},
      {"setpriority", {Ne(1, 0)}, EPERM, When::kAlways, "no renicing another process"},
      {"ioprio_set",
       {Ne(0, kIoprioWhoProcess)},
       EPERM,
       When::kAlways,
       "no I/O priority for a process group or every process of the uid"},
      {"ioprio_set", {Ne(1, 0)}, EPERM, When::kAlways, "no I/O priority for another process"},
      {"sched_setaffinity", {Ne(0, 0)}, EPERM, When::kAlways, "no pinning another process"},
      {"sched_setscheduler", {Ne(0, 0)}, EPERM, When::kAlways, "no starving another process"},
      {"sched_setparam", {Ne(0, 0)}, EPERM, When::kAlways, "no starving another process"},
      {"sched_setattr", {Ne(0, 0)}, EPERM, When::kAlways, "no starving another process"},
      // The operation on its low 32 bits: the kernel reads it as an unsigned
      // int, so 1 << 32 | SET_MODE_FILTER is SET_MODE_FILTER to it.
      {"seccomp",
       {Masked(0, kLow32, kSeccompSetModeFilter),
        Masked(1, kSeccompFilterFlagNewListener, kSeccompFilterFlagNewListener)},
       EPERM,
       When::kAlways,
       "no seccomp user-notification supervisor inside the sandbox"},

      // Terminal injection into an inherited terminal (CVE-2017-5226). The
      // request is compared on its low 32 bits: the kernel ignores the upper
      // ones (CVE-2019-10063).
      {"ioctl", {Masked(1, kLow32, TIOCSTI)}, EPERM, When::kAlways, "no typing into the agent's terminal"},
      {"ioctl", {Masked(1, kLow32, TIOCLINUX)}, EPERM, When::kAlways, "no console selection/paste injection"},

      // A whiteout (a character device 0:0) made by rename: which Landlock
      // right it needs changed with the kernel (erratum 4), and a kernel
      // without the fix asks only MAKE_REG, so a job would make a device node
      // where it has no MAKE_CHAR. Only overlayfs needs whiteouts.
      {"renameat2",
       {Masked(4, kRenameWhiteout, kRenameWhiteout)},
       EPERM,
       When::kAlways,
       "no whiteouts: renameat2(RENAME_WHITEOUT) makes a character device"},
      // A whiteout made by mknod(S_IFCHR, 0:0) needs no CAP_MKNOD, and a
      // kernel with the erratum's fix asks MAKE_REG for it, which writable
      // grants have. The device number is compared on its low 32 bits, as
      // the kernel reads it (arm64 has mknodat alone).
      {"mknodat",
       {Masked(2, S_IFMT, S_IFCHR), Masked(3, kLow32, 0)},
       EPERM,
       When::kAlways,
       "no whiteouts: mknod of a character device 0:0"},
      {"mknod",
       {Masked(1, S_IFMT, S_IFCHR), Masked(2, kLow32, 0)},
       EPERM,
       When::kAlways,
       "no whiteouts: mknod of a character device 0:0"},

      // exec_writable = false: executing a written file without execve on a path.
      {"memfd_create", {}, EPERM, When::kExecWritableDeny, "memfd + fexecve runs unwritten-to-disk code"},
      {"execveat",
       {Masked(4, AT_EMPTY_PATH, AT_EMPTY_PATH)},
       EPERM,
       When::kExecWritableDeny,
       "execveat(fd, \"\", AT_EMPTY_PATH) executes an already-open written file"},
  };

  // Namespace flags on clone(); each flag is its own row so the report names it.
  const std::pair<uint64_t, const char*> ns_flags[] = {
      {CLONE_NEWNS, "CLONE_NEWNS"},   {CLONE_NEWCGROUP, "CLONE_NEWCGROUP"}, {CLONE_NEWUTS, "CLONE_NEWUTS"},
      {CLONE_NEWIPC, "CLONE_NEWIPC"}, {CLONE_NEWUSER, "CLONE_NEWUSER"},     {CLONE_NEWPID, "CLONE_NEWPID"},
      {CLONE_NEWNET, "CLONE_NEWNET"},
  };
  t.reserve(t.size() + std::size(ns_flags) + 64);  // the rows below, without a reallocation per doubling
  for (const auto& [flag, name] : ns_flags)
    t.push_back({"clone", {Masked(0, flag, flag)}, EPERM, When::kAlways, std::string("no new namespace: ") + name});

  // socket(): every family but unix, IPv4 and IPv6. Families above AF_INET6
  // are refused with one >= row, which also catches a family with any upper
  // bit set (the kernel would read only the low 32 bits).
  for (uint64_t family = AF_UNSPEC; family < AF_INET6; ++family) {
    if (family == AF_UNIX || family == AF_INET) continue;
    t.push_back({"socket", {Eq(0, family)}, EPERM, When::kAlways, "only unix, IPv4 and IPv6 sockets"});
  }
  t.push_back({"socket",
               {Ge(0, AF_INET6 + 1)},
               EPERM,
               When::kAlways,
               "only unix, IPv4 and IPv6 sockets (netlink, packet, vsock, ...)"});

  // egress-allowlist: IPv4/IPv6 TCP streams only (Landlock then limits TCP to
  // the proxy port). No UDP (Landlock does not cover it), no raw, no SCTP or
  // MPTCP (MPTCP side-steps Landlock's TCP rules).
  for (uint64_t family : {uint64_t{AF_INET}, uint64_t{AF_INET6}}) {
    for (uint64_t type : {SOCK_DGRAM, SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET})
      t.push_back({"socket",
                   {Eq(0, family), Masked(1, kSockTypeMask, type)},
                   EPERM,
                   When::kNetEgressAllowlist,
                   "egress-allowlist: TCP streams only"});
    t.push_back({"socket",
                 {Eq(0, family), Ge(2, IPPROTO_TCP + 1)},
                 EPERM,
                 When::kNetEgressAllowlist,
                 "egress-allowlist: plain TCP only (no MPTCP or SCTP)"});
  }
  // egress-any: IPv4/IPv6 streams and datagrams (TCP, UDP, ICMP echo
  // sockets); the job's ruleset decides by address. Nothing that builds its
  // own headers or speaks a protocol the stack does not carry.
  for (uint64_t family : {uint64_t{AF_INET}, uint64_t{AF_INET6}})
    for (uint64_t type : {SOCK_RAW, SOCK_RDM, SOCK_SEQPACKET, SOCK_DCCP, SOCK_PACKET})
      t.push_back({"socket",
                   {Eq(0, family), Masked(1, kSockTypeMask, type)},
                   EPERM,
                   When::kInetSockets,
                   "egress-any or ipc job: stream and datagram sockets only (no raw sockets)"});
  // SCTP and UDP-Lite never cross the user-mode stack; refused, their
  // modules are never loaded on the job's behalf.
  for (uint64_t family : {uint64_t{AF_INET}, uint64_t{AF_INET6}})
    for (uint64_t protocol : {uint64_t{IPPROTO_SCTP}, uint64_t{IPPROTO_UDPLITE}})
      t.push_back(
          {"socket",
           {Eq(0, family), Eq(2, protocol)},
           EPERM,
           When::kInetSockets,
           "egress-any or ipc job: no SCTP or UDP-Lite (the stack carries neither; their modules stay unloaded)"});
  // TCP Fast Open connects from inside sendto/sendmsg, where Landlock's
  // connect check never runs (landlock-lsm/linux#41): refuse the flag.
  for (const auto& [syscall, flags_arg] : {std::pair{"sendto", 3u}, {"sendmsg", 2u}, {"sendmmsg", 3u}})
    t.push_back({syscall,
                 {Masked(flags_arg, MSG_FASTOPEN, MSG_FASTOPEN)},
                 EPERM,
                 When::kNetEgressAllowlist,
                 "egress-allowlist: MSG_FASTOPEN connects without connect(), around Landlock's TCP rule"});
  return t;
}

}  // namespace

const std::vector<SeccompRule>& SeccompRuleTable() {
  static const std::vector<SeccompRule> table = BuildTable();
  return table;
}

std::string DescribeCondition(const SeccompRule& rule) {
  std::string out;
  for (const auto& a : rule.args) {
    char buf[96];
    switch (a.op) {
      case CmpOp::kEq: snprintf(buf, sizeof buf, "arg%u == %#llx", a.arg, (unsigned long long)a.value); break;
      case CmpOp::kNe: snprintf(buf, sizeof buf, "arg%u != %#llx", a.arg, (unsigned long long)a.value); break;
      case CmpOp::kGe: snprintf(buf, sizeof buf, "arg%u >= %#llx", a.arg, (unsigned long long)a.value); break;
      case CmpOp::kMaskedEq:
        snprintf(buf, sizeof buf, "(arg%u & %#llx) == %#llx", a.arg, (unsigned long long)a.mask,
                 (unsigned long long)a.value);
        break;
    }
    out += (out.empty() ? "" : " && ") + std::string(buf);
  }
  return out.empty() ? "always" : out;
}

const char* WhenName(When when) {
  switch (when) {
    case When::kAlways: return "always";
    case When::kNoBroker: return "no broker path";
    case When::kNetNone: return "net none";
    case When::kNetEgressAllowlist: return "net egress-allowlist";
    case When::kInetSockets: return "net egress-any or ipc job";
    case When::kNoJobIpc: return "ipc none";
    case When::kNoDebug: return "debug false";
    case When::kExecWritableDeny: return "exec_writable false";
  }
  return "?";
}

}  // namespace oarbank
