// The launcher's exit codes, assigned here and nowhere else.
// After a successful exec the launcher *is* the module, so any other status
// is the module's own.
#pragma once

namespace oarbank {

inline constexpr int kExitUsage = 64;        // bad arguments or a bad policy
inline constexpr int kExitNotEnforced = 70;  // a part of the cage cannot be applied in full
inline constexpr int kExitExecFailed = 71;   // the cage is in place but exec failed
// run and cage: the job ran, but a spool file (--stdout-file, --stderr-file)
// could not take all that was to be kept (EX_IOERR): the file is short, so
// the job's own status must not stand for success; --json keeps it.
inline constexpr int kExitOutputLost = 74;
inline constexpr int kExitNotApproved = 77;  // manifest-policy: the manifest's requests are not approved

}  // namespace oarbank
