// The kernel's own syscall numbers for each architecture the seccomp filter
// is built for, compiled in from sandbox/seccomp/syscalls.tsv (written by
// scripts/syscall-tables.sh from the kernel's UAPI headers of a newer kernel
// than any the project runs on).
//
// The table is what makes the filter forward-safe: a deny-list over a
// default of ALLOW lets through every syscall a kernel newer than its rows
// adds, so the filter answers ENOSYS to every number above the highest the
// table knows for its architecture (filter.h), the answer a kernel without
// the call would give, so libc falls back as it would there. A row names a
// syscall; the table says whether the architecture has it, and a row for a
// syscall an architecture lacks is dropped from that architecture's filter
// with the reason (plan.h), never silently.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oarbank {

enum class SeccompArch { kX86_64, kAarch64 };
inline constexpr SeccompArch kSeccompArches[] = {SeccompArch::kX86_64, SeccompArch::kAarch64};

// "x86_64", "aarch64": the machine names uname(2) gives.
const char* SeccompArchName(SeccompArch arch);
// The architecture of a uname(2) machine name, if the filter is built for it.
std::optional<SeccompArch> SeccompArchOf(std::string_view machine);
// The architecture this program runs as.
SeccompArch NativeSeccompArch();

// The number of `name` on `arch`, or -1 where the architecture has no such
// syscall or the table does not know it.
int SyscallNumber(std::string_view name, SeccompArch arch);

// Every syscall `arch` has in the table, by name.
std::vector<std::string> SyscallNames(SeccompArch arch);

// The highest number the table knows for `arch`: the filter answers ENOSYS
// above it. In the test-only build, OARBANK_FAULT_SYSCALL_TABLE_END=<N>
// makes the table end at N, as a build made before the later syscalls
// existed would (fault_hooks.h).
int HighestSyscall(SeccompArch arch);

// Where the table comes from ("linux-libc-dev 7.3.4-1~bpo13+1").
std::string SyscallTableSource();

}  // namespace oarbank
