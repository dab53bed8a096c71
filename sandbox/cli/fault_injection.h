// Test-only, compiled into oarbank-agent-faulty and never into
// oarbank-agent (sandbox/common/fault_hooks.h): the environment variables
// that make the faulty launcher break a rule, skip a step or pause.
#pragma once

#include "sandbox/plan/plan.h"

namespace oarbank {

// Sets fault_hooks from the environment:
// - OARBANK_FAULT_PAUSE=<point> with OARBANK_FAULT_PAUSE_FILE=<file>: the
//   process that reaches <point> writes "<pid> <a> <b>\n" to <file> (whole,
//   by rename) and waits until <file>.go exists (at most 60 s).
// - OARBANK_FAULT_SKIP_STEP=<step name>[,<step name>...]: the launcher
//   leaves those steps out.
// - OARBANK_FAULT_SYSCALL_TABLE_END=<N>: the syscall table ends at N, as in a
//   build made before the later syscalls existed.
// - OARBANK_FAULT_LANDLOCK_MISSING=<feature>: the host probe takes that
//   Landlock feature as missing.
void InstallFaultHooks();

// Breaks one rule of the plan on purpose, so a test can show that the
// battery turns the matching probe red: OARBANK_FAULT_DROP_SECCOMP=<syscall>,
// OARBANK_FAULT_UNHANDLE_FS=<bit>, OARBANK_FAULT_UNHANDLE_SCOPES,
// OARBANK_FAULT_WRITABLE_MOUNTS, and mutation points
// (OARBANK_FAULT_MUTANT=<id>[,<id>...], mutation_points.h: a pair mutant
// names two). Installed as the
// mutate_plan hook, so sandbox-exec and the supervisor both apply it. The
// variables are removed before the module runs.
void InjectFaults(Plan& plan);

}  // namespace oarbank
