#include "sandbox/seccomp/syscall_table.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "sandbox/common/fault_hooks.h"

namespace oarbank {
namespace {

struct SyscallRow {
  std::string_view name;  // its length known at compile time: a lookup compares lengths before text
  int x86_64;             // -1: none
  int aarch64;            // -1: none
};

// kSyscallTableSource and kSyscallRows, generated from syscalls.tsv.
#include "sandbox/seccomp/syscall_table.inc"

// The rows' indices in the order of their names, sorted at compile time:
// a lookup by name is a binary search (a launch looks up every row of the
// rule table, a scan of the whole table each).
constexpr size_t kRowCount = std::size(kSyscallRows);
constexpr std::array<uint16_t, kRowCount> kRowsByName = [] {
  std::array<uint16_t, kRowCount> order{};
  for (size_t i = 0; i < kRowCount; ++i) order[i] = static_cast<uint16_t>(i);
  std::sort(order.begin(), order.end(),
            [](uint16_t a, uint16_t b) { return kSyscallRows[a].name < kSyscallRows[b].name; });
  return order;
}();

constexpr int Column(const SyscallRow& row, SeccompArch arch) {
  return arch == SeccompArch::kX86_64 ? row.x86_64 : row.aarch64;
}

// The highest number of each architecture's column, worked out at compile
// time: every lookup compares against it.
constexpr int TableHighest(SeccompArch arch) {
  int highest = -1;
  for (const SyscallRow& row : kSyscallRows) highest = std::max(highest, Column(row, arch));
  return highest;
}
constexpr int kHighestX86_64 = TableHighest(SeccompArch::kX86_64);
constexpr int kHighestAarch64 = TableHighest(SeccompArch::kAarch64);

// The table's end as this build sees it: the fault hook can only lower it.
int End(int highest) {
  const int end = fault_hooks.syscall_table_end;
  return end >= 0 && end < highest ? end : highest;
}

}  // namespace

const char* SeccompArchName(SeccompArch arch) { return arch == SeccompArch::kX86_64 ? "x86_64" : "aarch64"; }

std::optional<SeccompArch> SeccompArchOf(std::string_view machine) {
  for (SeccompArch arch : kSeccompArches)
    if (machine == SeccompArchName(arch)) return arch;
  return std::nullopt;
}

SeccompArch NativeSeccompArch() {
#if defined(__x86_64__) && !defined(__ILP32__)
  return SeccompArch::kX86_64;
#elif defined(__aarch64__)
  return SeccompArch::kAarch64;
#else
#error "the seccomp filter is built for x86_64 and aarch64 only"
#endif
}

int SyscallNumber(std::string_view name, SeccompArch arch) {
  const auto it = std::lower_bound(kRowsByName.begin(), kRowsByName.end(), name,
                                   [](uint16_t row, std::string_view key) { return kSyscallRows[row].name < key; });
  if (it == kRowsByName.end() || kSyscallRows[*it].name != name) return -1;
  const int nr = Column(kSyscallRows[*it], arch);
  return nr >= 0 && nr <= HighestSyscall(arch) ? nr : -1;
}

std::vector<std::string> SyscallNames(SeccompArch arch) {
  std::vector<std::string> names;
  for (const SyscallRow& row : kSyscallRows)
    if (SyscallNumber(row.name, arch) >= 0) names.emplace_back(row.name);
  return names;
}

int HighestSyscall(SeccompArch arch) { return End(arch == SeccompArch::kX86_64 ? kHighestX86_64 : kHighestAarch64); }

std::string SyscallTableSource() { return kSyscallTableSource; }

}  // namespace oarbank
