// The seccomp rule table: one row per rule (syscall by name, argument
// condition, errno, when it applies, why). The filter is a deny-list over a
// default of ALLOW; a foreign architecture (int 0x80 i386 calls) or the x32
// ABI kills the process (the filter's bad-arch action), so a rule here cannot
// be side-stepped through another syscall table. Every number above the
// kernel syscall table the build knows answers ENOSYS (syscall_table.h), so
// the deny-list does not open with each new kernel. A row names a syscall
// by its name; an architecture that has no such syscall leaves the row out,
// and the plan says so.
//
// Hot syscalls (read, write, futex, mmap, getppid, ...) never appear here, so
// the kernel keeps them in its per-syscall "always allow" cache and pays no
// BPF run for them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oarbank {

// Which policies a row applies to.
enum class When {
  kAlways,
  kNoBroker,  // no broker reachable by path (none granted, or an inherited fd below ABI 9): no AF_UNIX socket at all
  kNetNone,   // net.mode = none
  kNetEgressAllowlist,  // net.mode = egress-allowlist
  // IPv4/IPv6 sockets are the job's to make (net.mode egress-any, whose
  // ruleset decides by address, or ipc "job", whose network namespace holds
  // nothing but its loopback and the egress proxy): their kinds are limited.
  kInetSockets,
  kNoJobIpc,          // ipc "none": never listening, no address of its own
  kNoDebug,           // debug false: no tracing, no reading or writing another process's memory
  kExecWritableDeny,  // exec_writable = false
};

enum class CmpOp { kEq, kMaskedEq, kGe, kNe };

struct ArgCmp {
  unsigned arg;  // 0-based syscall argument
  CmpOp op;
  uint64_t value;
  uint64_t mask = 0;  // kMaskedEq only: (arg & mask) == value
};

struct SeccompRule {
  std::string syscall;
  std::vector<ArgCmp> args;  // all must hold
  int err;                   // the errno the call answers
  When when;
  std::string why;
};

// The whole table; PlanConfinement selects the rows for a policy.
const std::vector<SeccompRule>& SeccompRuleTable();

// "arg0 == 1 && (arg1 & 0xf) == 2", for the report.
std::string DescribeCondition(const SeccompRule& rule);
const char* WhenName(When when);

}  // namespace oarbank
