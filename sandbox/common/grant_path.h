// Every path that becomes a grant or a mount (policy fields, cage options,
// Spec fields, read-only carve-outs, git directories, the broker socket) is
// untrusted input: a job that could write anywhere on the way, in this run
// or an earlier one, could have put a symbolic link there, and a grant that
// followed it would open whatever the link names (the caller's home, /).
//
// ResolveGrantPath opens such a path whole with no link followed
// (open_no_symlinks.h) when it has no link and no "..", and otherwise walks
// it from / one component at a time, each opened with no link followed, and
// follows a symbolic link only where no job can have written it:
//   - in a system directory whose links the distribution makes: /, /var
//     (/var/run, /var/lock), /etc/alternatives, and /usr, /bin, /sbin and
//     /lib* with everything below them (no policy may grant a writable
//     directory inside the base system, so no job writes there);
//   - owned by root, as is every directory from / down to it, none of them
//     writable by group or others (a world-writable /tmp breaks the chain);
//   - and not at or below a path the caller names (`named`): a writable
//     grant at /var would make /var's links a job's.
// Ownership is read in the agent's user namespace, the host's. Root alone
// counts: a job run as root makes root-owned directories 0755, so "owned by
// root and writable by no one else" alone would trust what a root job wrote;
// the fixed locations above are what rule that out.
// Any other link is refused: the error names the path and the link.
//
// The result is canonical (no link left in it), so the launcher can open it
// again inside the job's mount namespace with no link allowed at all, and
// carries the inode the walk found, so that second open, the bind made from
// it and the gate's read-back can each be tied to what was checked here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/common/expected.h"

namespace oarbank {

// An inode: st_dev and st_ino. Zero: not known (nothing to check).
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool known() const { return dev != 0 || ino != 0; }
  bool operator==(const FileId&) const = default;
};

// What a path led to: its canonical form and its inode.
struct ResolvedPath {
  std::string path;  // absolute, canonical: no symbolic link in it
  FileId inode;
  mode_t type = 0;                 // st_mode & S_IFMT
  std::vector<std::string> links;  // each system link followed, where it was (canonical)
};

struct ResolveOptions {
  // Paths at or below which no link is followed (the caller's other
  // grants, as it names them).
  std::vector<std::string> named;
  // No mount point may be crossed strictly below any of these canonical
  // directories (RESOLVE_NO_XDEV inside a grant: a carve-out, a .git, a
  // broker mount). Crossing from / into /home stays allowed.
  std::vector<std::string> no_xdev_below;
};

// The system directories whose links may be followed (see above).
bool IsTrustedLinkDirectory(const std::string& canonical_dir);

// `raw`: an absolute path. The Error's `where` is empty (the caller names
// the field); `what` says which component failed and why.
Expected<ResolvedPath> ResolveGrantPath(const std::string& raw, const ResolveOptions& options = {});

// The same walk with another judge of the directories whose links may be
// followed, in place of IsTrustedLinkDirectory: for the resolver's own
// tests, which stand a temporary tree in for the system's directories.
// Ownership is judged as above.
using LinkDirectoryJudge = bool (*)(const std::string& canonical_dir);
Expected<ResolvedPath> ResolveGrantPathJudged(const std::string& raw, const ResolveOptions& options,
                                              LinkDirectoryJudge judge);

// "/a/./b/../c" -> "/a/c", lexically ("/" for nothing). Equal to the real
// path only where no component is a link, which a walk must prove.
std::string NormalizePath(const std::string& absolute);

}  // namespace oarbank
