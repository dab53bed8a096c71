// The launcher's mount-namespace step (enforce.h), in its stages:
//
//   root's /etc      (root, with a plan's root_etc_view) the idmapped
//                    copy of /etc made now, unless the caller brought one
//   origin           the uid, gid and working directory, noted before the
//                    namespaces change them
//   namespaces       (unless the caller already has its own) a user and
//                    mount namespace, mapping the uid and gid to themselves
//   private          no mount made here propagates back to the host
//   copy the grants  each writable grant opened with no symlink, witnessed
//                    (its inode and the directory it is named in) and
//                    copied (open_tree), nosuid, nodev, noexec unless
//                    exec_writable
//   read-only        every mount read-only (plan.read_only_mounts)
//   bind the grants  each copy attached where its grant still is, parents
//                    first; then every grant checked still in place
//   carve-outs       the read_only parts of the grants (carve_out.h)
//   check            / read-only, each grant on a noexec mount, as the
//                    module will reach them by name
//   job devices      a job's own devpts and /dev/shm (job_devices.h)
//   attach /etc      root's idmapped /etc over /etc
//   working dir      resolved again, so it meets the binds
//
// It runs after fork, in the process that becomes the module. The step
// ends at the first failure (a StepFailure of the mount-namespace step);
// the launch stops there.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sandbox/common/unique_fd.h"
#include "sandbox/launch/enforce.h"
#include "sandbox/plan/plan.h"

namespace oarbank {

// What each writable grant was when it was opened for its bind: its inode,
// and the directory it is named in, so its name can be looked up again in
// the host's directory (a bind sits on the dentry it was attached to; a
// directory deleted or renamed and another made at its path is a new dentry
// with no bind). A launch bound to a directory that is no longer the one at
// its path is refused, as a symlink swap is.
struct GrantWitness {
  std::string path;
  dev_t dev = 0;
  ino_t ino = 0;
  UniqueFd parent;  // O_PATH, opened with no symlink
  std::string name;
};

struct GrantWitnesses {
  std::vector<GrantWitness> grants;
};

// The mount-namespace step; fills `witnesses` with the writable grants it
// bound.
std::optional<StepFailure> EnterMountNamespace(const Plan& plan, const LaunchOptions& options,
                                               GrantWitnesses& witnesses);

// Every witnessed grant is still the inode at its path (the launch checks
// again before and after the gate).
std::optional<StepFailure> CheckGrantsInPlace(const GrantWitnesses& witnesses);

}  // namespace oarbank
