// Files that carry trust: the battery attestation (which policy classes the
// escape battery proved on this host), the operator's approvals store and
// the tool registry. Whoever can write one of them decides what runs, so
// they are read only when nobody but root (or the agent's own uid) can have
// written them, and written so that nobody can slip a link under the write.
//
// The rule, as OpenSSH's StrictModes applies it to authorized_keys:
//   - the file and every directory from / down to it are owned by root or
//     by the agent's effective uid, and writable by no one else (group or
//     others); a root-owned directory with the sticky bit (/tmp) is safe
//     for what lies below it, since nobody else may rename or remove root's
//     entries there;
//   - the file itself is a regular file, not a symbolic link, with one link
//     (a hard link could name a file its planter chose);
//   - directories are walked with openat(O_NOFOLLOW) from /, and the file is
//     opened O_NOFOLLOW | O_NONBLOCK beneath the last one, so nothing can be
//     swapped between the check and the read, and a FIFO never blocks.
// Symbolic links among the directories (/var/run -> /run) are resolved
// first: what counts is the directory the file really lies in.
//
// Writes are atomic: a temporary file created exclusively (O_EXCL, never
// through a link) beside the target, written, fchmod to its mode whatever
// the umask, fsync'd and renamed over the target, then the directory is
// fsync'd. A target that is anything but a trusted regular file (a planted
// symlink, hard link or FIFO) is refused, never replaced or written through.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "sandbox/common/expected.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {

// The largest trust file read (an approvals store with some ten thousand
// records fits).
inline constexpr size_t kTrustFileMaxBytes = 16 << 20;

// A directory that passed the walk, open O_PATH|O_DIRECTORY.
struct TrustedDir {
  std::string path;  // with symlinks resolved
  UniqueFd fd;
};

// Walks `dir` from / (after resolving symlinks) and checks every directory.
// With `create_last`, a missing last directory is created 0755 (its parent
// must pass first). The error names the path and what is wrong.
Expected<TrustedDir> OpenTrustedDir(const std::string& dir, bool create_last = false);

// The contents of the trust file at `path`; nullopt when it does not exist
// (its directories must still pass). The error is one line naming the path.
Expected<std::optional<std::string>> ReadTrustedFile(const std::string& path);

// Whether the file at `path` exists and passes the same checks as
// ReadTrustedFile, without reading it: for a program the agent runs with its
// own privilege (a helper, the job's network stack), where what matters is
// who could have written it, not what it says.
Expected<bool> CheckTrustedFile(const std::string& path);

// Writes `text` to `path` atomically with `mode` (see above). The parent
// directory must pass the walk (it is created when missing, if its own
// parent passes). Returns the error, or nothing.
std::optional<Error> WriteTrustedFile(const std::string& path, const std::string& text, mode_t mode = 0644);

// An exclusive flock(2) on "<path>.lock" beside a trust file, held while the
// object lives: read-modify-write of the approvals store goes under it. The
// lock file must itself be a regular file owned by a trusted uid.
class TrustLock {
 public:
  static Expected<TrustLock> Acquire(const std::string& path);

 private:
  explicit TrustLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace oarbank
