// Carrying out a Plan in the process that will become the module. The
// launch is one ordered list of named steps; each either succeeds in full or
// the launch stops with a StepFailure naming the step (exit 70):
//
//   close-fds        every inherited fd but stdio is made close-on-exec
//   no-new-privs     PR_SET_NO_NEW_PRIVS: exec can never add privileges
//   mount-namespace  (exec_writable=false) private user+mount namespace,
//                    writable grants re-bound noexec,nosuid,nodev
//   drop-capabilities  bounding, ambient, inheritable, permitted, effective
//   landlock         the ruleset for the host's ABI, then restrict_self
//   seccomp          the deny-list; foreign and x32 syscall ABIs kill
//   exec             (exit 71 if it fails)
//
// Landlock and seccomp cannot be undone, so tests run these steps in a
// forked child.
#pragma once

#include <optional>
#include <string>

#include "plan.h"

namespace oarbank {

enum class LaunchStep {
  kPlacement,
  kCloseFds,
  kNoNewPrivs,
  kMountNamespace,
  kDropCapabilities,
  kLandlock,
  kSeccomp,
  kExec,
};
const char* StepName(LaunchStep step);

// Fixed size, no allocation: a forked child can send it over a pipe.
struct StepFailure {
  LaunchStep step = LaunchStep::kPlacement;
  int err = 0;           // errno, 0 when not a syscall failure
  char detail[200] = {};
};

// "sandbox: landlock: /srv/bundle: Permission denied"
std::string StepFailureLine(const StepFailure& failure);

// Applies every step but exec to the calling (single-threaded) process.
// Refuses a plan whose placement is not ok. Irreversible.
std::optional<StepFailure> ConfineSelf(const Plan& plan);

// Execs argv (PATH search like execvp). Returns only on failure, with errno set.
void ExecModule(char* const argv[]);

}  // namespace oarbank
