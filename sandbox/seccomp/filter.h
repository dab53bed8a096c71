// From seccomp rows (sandbox/seccomp/rules.h) to the BPF program the kernel
// loads, for one architecture (syscall_table.h).
//
// The table program (TableProgram) comes first: a call of another
// architecture (i386 through int 0x80, AArch32 on arm64) and an x32 call
// kill the process; every number above the highest the syscall table knows
// answers ENOSYS, so a kernel newer than the table adds nothing the filter
// lets through; and the rows that name a syscall newer than libseccomp
// (Debian 12's 2.5.4 stops before them) answer their errno. It is written
// here by hand because libseccomp has no rule for "every number above N" and
// cannot name a syscall it does not know on another architecture than the
// one it runs on.
//
// libseccomp compiles every other row (CompileSeccomp): default ALLOW, each
// row's errno, and the bad-arch action KILL_PROCESS. Compiling costs a launch
// about as much as everything else it does to confine itself, so the build
// compiles every row set the table can select once, for each architecture,
// with its table program (sandbox/seccomp/precompile.cc), and the binary
// carries the programs
// (PrecompiledSeccomp). A launch looks its rows up by their exact content,
// not by the policy that chose them: rows that differ in any way (a test
// build that drops one on purpose) find nothing and are compiled at launch by
// the same code.
//
// The launch loads the two as one filter (ChainSeccomp): the table
// program's final ALLOW becomes the start of libseccomp's program. That
// answers every call as the two filters loaded apart would (the kernel takes
// the strictest answer of its filters): the table answers only calls no
// libseccomp row can match (another architecture, x32, a number above the
// table, a syscall libseccomp does not know), with a kill or an errno, and
// libseccomp's program answers those with its kill or its default ALLOW, never
// anything stricter. Each filter the kernel loads costs it a fixed
// conversion and JIT of tens of microseconds.
#pragma once

#include <linux/filter.h>

#include <array>
#include <span>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/seccomp/rules.h"
#include "sandbox/seccomp/syscall_table.h"

namespace oarbank {

// The rows as the filter of `arch` sees them: the architecture, then the
// syscall, conditions and errno of each row, in order ("why" and "when" do
// not reach the kernel). Equal keys compile to the same program.
std::string SeccompRowsKey(const std::vector<SeccompRule>& rows, SeccompArch arch);

// Every row set PlanConfinement can select from the table for `arch` (the
// rows that apply always, plus those of each subset of the table's other
// conditions), less the rows whose syscall `arch` does not have.
std::vector<std::vector<SeccompRule>> SeccompRowSets(SeccompArch arch);

// Whether libseccomp compiles `rule` on `arch`; the table program takes the
// others (a syscall newer than libseccomp, with no argument condition).
bool LibseccompKnows(const SeccompRule& rule, SeccompArch arch);

// libseccomp's program for the rows of `rows` it knows on `arch`. An error
// names the row or the libseccomp call that failed and why.
Expected<std::vector<sock_filter>> CompileSeccomp(const std::vector<SeccompRule>& rows, SeccompArch arch);

// The build's programs for exactly these rows on `arch`: libseccomp's, and
// the table program for the table's end as the build knew it (`highest`).
// Empty spans when the build did not compile these rows.
struct PrecompiledFilters {
  std::span<const sock_filter> rows, table;
  int highest = -1;
};
PrecompiledFilters FindPrecompiled(const std::vector<SeccompRule>& rows, SeccompArch arch);
// FindPrecompiled's libseccomp program alone.
std::span<const sock_filter> PrecompiledSeccomp(const std::vector<SeccompRule>& rows, SeccompArch arch);

// The table program for `arch`: ENOSYS above `highest` (HighestSyscall),
// and the rows of `rows` libseccomp does not know (LibseccompKnows). An
// error names a row it cannot take (one with an argument condition).
inline constexpr size_t kMaxTableProgram = 64;
struct TableProgram {
  std::array<sock_filter, kMaxTableProgram> code{};
  size_t length = 0;
  std::span<const sock_filter> span() const { return {code.data(), length}; }
};
Expected<TableProgram> MakeTableProgram(const std::vector<SeccompRule>& rows, SeccompArch arch, int highest);

// The table program and libseccomp's as one program: `table` with its last
// instruction, which must be its one unconditional ALLOW, replaced by
// `rows`. An error when `table` does not end so or the two together are
// longer than the kernel takes (BPF_MAXINSNS).
Expected<std::vector<sock_filter>> ChainSeccomp(std::span<const sock_filter> table, std::span<const sock_filter> rows);

}  // namespace oarbank
