// A supervised job's own devices: a devpts instance of its own (/dev/pts,
// with /dev/ptmx bound to its ptmx) and a /dev/shm tmpfs of its own, so
// that pseudo-terminals (script, editors) and POSIX shared memory and
// semaphores (Python's multiprocessing) work, and neither reaches the
// host's or another job's. Both are mounted by the launcher in the job's
// mount namespace after every other mount was made read-only; the job's
// Landlock domain is granted exactly these (and /dev/tty, which in a job
// of a new session can only be its own terminal).
//
// sandbox-exec, which has no job, leaves /dev as the host has it: there
// /dev/ptmx, /dev/pts and /dev/shm stay refused.
//
// The terminal (RunOptions::pty): the launcher opens a pty of the job's
// devpts, makes its peer the job's stdin, stdout, stderr and controlling
// terminal, and hands the master to the supervisor over the gate socket.
#pragma once

#include <cstdint>

#include "sandbox/plan/plan.h"

namespace oarbank {

// JobDevices, kDefaultShmBytes and kShmInodes are the plan's
// (sandbox/plan/plan.h).

// The launcher's message that carries the job's terminal (the master, as
// SCM_RIGHTS) on the gate socket, before kGateReady.
inline constexpr char kGateTerminal = 'T';

// PlanJobDevices (sandbox/plan/plan.h) turns them on in a plan and grants
// them in its Landlock ruleset.

// In the launcher, in the job's own mount namespace, after the read-only
// remount: mounts the devpts instance and /dev/shm and checks them. 0, or
// the errno with *what naming the part.
int MountJobDevices(const JobDevices& devices, const char** what);

// In the launcher, a session leader with no controlling terminal, once the
// devpts instance is mounted: the job's terminal (see above). 0 or an
// errno with *what.
int OpenJobTerminal(int gate_fd, const char** what);

}  // namespace oarbank
