#include "sandbox/seccomp/filter.h"

#include <errno.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

namespace oarbank {
namespace {

scmp_compare ToScmp(CmpOp op) {
  switch (op) {
    case CmpOp::kEq: return SCMP_CMP_EQ;
    case CmpOp::kMaskedEq: return SCMP_CMP_MASKED_EQ;
    case CmpOp::kGe: return SCMP_CMP_GE;
    case CmpOp::kNe: return SCMP_CMP_NE;
  }
  return SCMP_CMP_EQ;
}

Error Failed(const std::string& where, int err) { return Error{where, strerror(err)}; }

// The program libseccomp exported to `fd`.
Expected<std::vector<sock_filter>> ReadProgram(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Failed("export", errno);
  if (st.st_size <= 0 || st.st_size % sizeof(sock_filter) != 0) return Error{"export", "not a BPF program"};
  std::vector<sock_filter> program(static_cast<size_t>(st.st_size) / sizeof(sock_filter));
  if (pread(fd, program.data(), static_cast<size_t>(st.st_size), 0) != st.st_size) return Failed("export", errno);
  return program;
}

// A syscall by name; one newer than the libseccomp this is built with
// (Debian 12's 2.5.4) by its x86_64 number (the kernel's syscall_64.tbl).
int ResolveSyscall(const std::string& name) {
  const int nr = seccomp_syscall_resolve_name(name.c_str());
  if (nr != __NR_SCMP_ERROR) return nr;
#if defined(__x86_64__)
  static constexpr std::pair<std::string_view, int> kNewer[] = {
      {"getxattrat", 464},  // Linux 6.13
      {"listxattrat", 465},
  };
  for (const auto& [newer, number] : kNewer)
    if (newer == name) return number;
#endif
  return __NR_SCMP_ERROR;
}

Expected<std::vector<sock_filter>> Compile(scmp_filter_ctx ctx, const std::vector<SeccompRule>& rows) {
  // Only the native ABI is in the filter: i386 (int 0x80) and x32 calls take
  // the bad-arch action and kill the process.
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc != 0)
    return Failed("bad-arch action", -rc);
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0) return Failed("optimize", -rc);
  for (const auto& rule : rows) {
    const int nr = ResolveSyscall(rule.syscall);
    if (nr == __NR_SCMP_ERROR) return Failed(rule.syscall, ENOSYS);
    if (rule.args.size() > 6) return Failed(rule.syscall, EINVAL);
    scmp_arg_cmp cmps[6];
    unsigned n = 0;
    for (const auto& a : rule.args) {
      cmps[n++] = a.op == CmpOp::kMaskedEq ? scmp_arg_cmp{a.arg, SCMP_CMP_MASKED_EQ, a.mask, a.value}
                                           : scmp_arg_cmp{a.arg, ToScmp(a.op), a.value, 0};
    }
    if (int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(static_cast<uint16_t>(rule.err)), nr, n, cmps); rc != 0)
      return Failed(rule.syscall, -rc);
  }
  const int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
  if (fd < 0) return Failed("export", errno);
  Expected<std::vector<sock_filter>> program = Error{"export", "not run"};
  if (int rc = seccomp_export_bpf(ctx, fd); rc != 0) {
    program = Failed("export", -rc);
  } else {
    program = ReadProgram(fd);
  }
  close(fd);
  return program;
}

}  // namespace

std::string SeccompRowsKey(const std::vector<SeccompRule>& rows) {
  std::string key;
  key.reserve(rows.size() * 32);
  char buf[96];
  for (const auto& rule : rows) {
    key += rule.syscall;
    snprintf(buf, sizeof buf, " errno=%d", rule.err);
    key += buf;
    for (const auto& a : rule.args) {
      snprintf(buf, sizeof buf, " arg%u:%d:%" PRIx64 ":%" PRIx64, a.arg, static_cast<int>(a.op), a.value, a.mask);
      key += buf;
    }
    key += '\n';
  }
  return key;
}

std::vector<std::vector<SeccompRule>> SeccompRowSets() {
  const auto& table = SeccompRuleTable();
  std::vector<When> conditions;
  for (const auto& rule : table)
    if (rule.when != When::kAlways && std::find(conditions.begin(), conditions.end(), rule.when) == conditions.end())
      conditions.push_back(rule.when);
  std::vector<std::vector<SeccompRule>> sets;
  for (unsigned subset = 0; subset < (1u << conditions.size()); ++subset) {
    auto holds = [&](When when) {
      if (when == When::kAlways) return true;
      const auto i = std::find(conditions.begin(), conditions.end(), when) - conditions.begin();
      return (subset >> i & 1) != 0;
    };
    std::vector<SeccompRule>& rows = sets.emplace_back();
    for (const auto& rule : table)
      if (holds(rule.when)) rows.push_back(rule);
  }
  return sets;
}

Expected<std::vector<sock_filter>> CompileSeccomp(const std::vector<SeccompRule>& rows) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Error{"seccomp_init", "libseccomp could not start a filter"};
  auto program = Compile(ctx, rows);
  seccomp_release(ctx);
  return program;
}

}  // namespace oarbank
