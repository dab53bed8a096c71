#include "sandbox/seccomp/filter.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
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

constexpr uint32_t kX32SyscallBit = 0x40000000;  // __X32_SYSCALL_BIT

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

uint32_t ScmpArch(SeccompArch arch) { return arch == SeccompArch::kX86_64 ? SCMP_ARCH_X86_64 : SCMP_ARCH_AARCH64; }

// The audit architecture the kernel reports in seccomp_data.arch.
uint32_t AuditArch(SeccompArch arch) { return ScmpArch(arch); }  // libseccomp's tokens are the AUDIT_ARCH_* values

Expected<std::vector<sock_filter>> Compile(scmp_filter_ctx ctx, const std::vector<SeccompRule>& rows,
                                           SeccompArch arch) {
  // Only `arch` is in the filter: i386 (int 0x80), x32 and AArch32 calls
  // take the bad-arch action and kill the process.
  if (arch != NativeSeccompArch()) {
    if (int rc = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE); rc != 0) return Failed("architecture", -rc);
    if (int rc = seccomp_arch_add(ctx, ScmpArch(arch)); rc != 0) return Failed("architecture", -rc);
  }
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc != 0)
    return Failed("bad-arch action", -rc);
  if (int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2); rc != 0) return Failed("optimize", -rc);
  for (const auto& rule : rows) {
    if (!LibseccompKnows(rule, arch)) continue;  // the table program's
    // libseccomp takes the native number (or its pseudo-number for a call
    // the native architecture lacks) and translates it by name to `arch`.
    const int nr = seccomp_syscall_resolve_name(rule.syscall.c_str());
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

std::string SeccompRowsKey(const std::vector<SeccompRule>& rows, SeccompArch arch) {
  std::string key = std::string("arch ") + SeccompArchName(arch) + "\n";
  key.reserve(rows.size() * 32);
  // std::to_chars, not snprintf: every launch builds the key of its rows, and
  // printf's machinery costs it tens of microseconds here.
  char buf[24];
  auto number = [&](auto value, int base) { key.append(buf, std::to_chars(buf, buf + sizeof buf, value, base).ptr); };
  for (const auto& rule : rows) {
    key += rule.syscall;
    key += " errno=";
    number(rule.err, 10);
    for (const auto& a : rule.args) {
      key += " arg";
      number(a.arg, 10);
      key += ':';
      number(static_cast<int>(a.op), 10);
      key += ':';
      number(a.value, 16);
      key += ':';
      number(a.mask, 16);
    }
    key += '\n';
  }
  return key;
}

bool LibseccompKnows(const SeccompRule& rule, SeccompArch arch) {
  const int nr = seccomp_syscall_resolve_name_arch(ScmpArch(arch), rule.syscall.c_str());
  return nr >= 0 && nr == SyscallNumber(rule.syscall, arch);
}

std::vector<std::vector<SeccompRule>> SeccompRowSets(SeccompArch arch) {
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
      if (holds(rule.when) && SyscallNumber(rule.syscall, arch) >= 0) rows.push_back(rule);
  }
  return sets;
}

Expected<std::vector<sock_filter>> CompileSeccomp(const std::vector<SeccompRule>& rows, SeccompArch arch) {
  for (const auto& rule : rows)
    if (SyscallNumber(rule.syscall, arch) < 0)
      return Error{rule.syscall, std::string("no such syscall on ") + SeccompArchName(arch)};
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return Error{"seccomp_init", "libseccomp could not start a filter"};
  auto program = Compile(ctx, rows, arch);
  seccomp_release(ctx);
  return program;
}

Expected<TableProgram> MakeTableProgram(const std::vector<SeccompRule>& rows, SeccompArch arch, int highest) {
  TableProgram p;
  auto emit = [&p](uint16_t code, uint8_t jt, uint8_t jf, uint32_t k) {
    if (p.length < p.code.size()) p.code[p.length] = sock_filter{code, jt, jf, k};
    ++p.length;
  };
  constexpr uint32_t kKill = SECCOMP_RET_KILL_PROCESS;
  constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
  auto errno_of = [](int err) { return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA); };
  // Another architecture's call: killed (the bad-arch action).
  emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(seccomp_data, arch));
  emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, AuditArch(arch));
  emit(BPF_RET | BPF_K, 0, 0, kKill);
  emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(seccomp_data, nr));
  // An x32 call (its number has bit 30 set): killed, ahead of the ENOSYS
  // below, which would otherwise answer it.
  if (arch == SeccompArch::kX86_64) {
    emit(BPF_JMP | BPF_JGE | BPF_K, 0, 1, kX32SyscallBit);
    emit(BPF_RET | BPF_K, 0, 0, kKill);
  }
  // Above the table: ENOSYS, as a kernel without the call would answer.
  emit(BPF_JMP | BPF_JGT | BPF_K, 0, 1, static_cast<uint32_t>(highest));
  emit(BPF_RET | BPF_K, 0, 0, errno_of(ENOSYS));
  for (const auto& rule : rows) {
    if (LibseccompKnows(rule, arch)) continue;
    const int nr = SyscallNumber(rule.syscall, arch);
    if (nr < 0) return Error{rule.syscall, std::string("no such syscall on ") + SeccompArchName(arch)};
    if (!rule.args.empty())
      return Error{rule.syscall, "newer than libseccomp, and the table program takes no argument condition"};
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, static_cast<uint32_t>(nr));
    emit(BPF_RET | BPF_K, 0, 0, errno_of(rule.err));
  }
  emit(BPF_RET | BPF_K, 0, 0, kAllow);
  if (p.length > p.code.size()) return Error{"table program", "more rows newer than libseccomp than it holds"};
  return p;
}

Expected<std::vector<sock_filter>> ChainSeccomp(std::span<const sock_filter> table, std::span<const sock_filter> rows) {
  const bool ends_allowing =
      !table.empty() && table.back().code == (BPF_RET | BPF_K) && table.back().k == SECCOMP_RET_ALLOW;
  // The table's jumps are forward and land at most on its last instruction:
  // the one ALLOW that now falls through to the rows. Any other RET ALLOW
  // would skip them.
  const bool allows_once =
      std::count_if(table.begin(), table.end(), [](const sock_filter& f) {
        return BPF_CLASS(f.code) == BPF_RET && !(BPF_RVAL(f.code) == BPF_K && f.k != SECCOMP_RET_ALLOW);
      }) == 1;
  if (!ends_allowing || !allows_once)
    return Error{"table program", "does not end in its only ALLOW: the rows cannot follow it"};
  if (rows.empty()) return Error{"rows program", "is empty"};
  if (table.size() - 1 + rows.size() > BPF_MAXINSNS)
    return Error{"filter", "the table and rows programs together have " +
                               std::to_string(table.size() - 1 + rows.size()) + " instructions (the kernel takes " +
                               std::to_string(BPF_MAXINSNS) + ")"};
  std::vector<sock_filter> chained(table.begin(), table.end() - 1);
  chained.insert(chained.end(), rows.begin(), rows.end());
  return chained;
}

}  // namespace oarbank
