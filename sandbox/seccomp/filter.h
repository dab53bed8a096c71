// From seccomp rows (sandbox/seccomp/rules.h) to the BPF program the kernel loads.
//
// libseccomp compiles the rows: default ALLOW, each row's errno, and the
// bad-arch action KILL_PROCESS, so an i386 (int 0x80) or x32 call never
// reaches a rule it could side-step. Compiling costs a launch about as much
// as everything else it does to confine itself, so the build compiles every
// row set the table can select once (sandbox/seccomp/precompile.cc) and the binary
// carries the programs (PrecompiledSeccomp). A launch looks its rows up by
// their exact content, not by the policy that chose them: rows that differ
// in any way (a test build that drops one on purpose) find nothing and are
// compiled at launch by the same code.
#pragma once

#include <linux/filter.h>

#include <span>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"
#include "sandbox/seccomp/rules.h"

namespace oarbank {

// The rows as the filter sees them: syscall, conditions and errno of each,
// in order ("why" and "when" do not reach the kernel). Equal keys compile to
// the same program.
std::string SeccompRowsKey(const std::vector<SeccompRule>& rows);

// Every row set PlanConfinement can select from the table: the rows that
// apply always, plus those of each subset of the table's other conditions.
std::vector<std::vector<SeccompRule>> SeccompRowSets();

// libseccomp's program for `rows`. An error names the row or the libseccomp
// call that failed (a syscall this libseccomp does not know) and why.
Expected<std::vector<sock_filter>> CompileSeccomp(const std::vector<SeccompRule>& rows);

// The build's program for exactly these rows, or an empty span.
std::span<const sock_filter> PrecompiledSeccomp(const std::vector<SeccompRule>& rows);

}  // namespace oarbank
