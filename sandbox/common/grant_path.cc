#include "sandbox/common/grant_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <vector>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/path_within.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

// Linux's own bound on the links one lookup follows.
constexpr int kMaxLinks = 40;

// Where the distribution keeps links and no policy can grant a job write
// access: each directory, and whether the rule covers what lies below it.
struct TrustedLinkDir {
  const char* dir;
  bool below;
};
constexpr TrustedLinkDir kTrustedLinkDirs[] = {
    {"/", false},      {"/var", false},  {"/etc/alternatives", false},
    {"/usr", true},    {"/bin", true},   {"/sbin", true},
    {"/lib", true},    {"/lib32", true}, {"/lib64", true},
    {"/libx32", true},
};

// One directory of the walk: where it is (canonical) and whether it and
// every directory above it are root's alone.
struct Level {
  UniqueFd fd;
  std::string path;
  bool roots_alone = false;
};

std::string Join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

bool RootsAlone(const struct stat& st) { return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0; }

// The components of `path` that name something ("" and "." do not), ".."
// kept as it is.
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(i, slash - i);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    i = slash + 1;
  }
  return parts;
}

// Puts the components of `path` in front of `pending`.
void PushFront(const std::string& path, std::deque<std::string>& pending) {
  const auto parts = Components(path);
  pending.insert(pending.begin(), parts.begin(), parts.end());
}

// Why the link `link` (to `target`) in `dir` may not be followed, or "".
std::string WhyNotFollow(const Level& dir, const std::string& link, const struct stat& st,
                         const ResolveOptions& options, LinkDirectoryJudge judge) {
  if (FaultSkipStep("grant-links")) return "";  // the test-only build's launcher that follows every link
  for (const auto& named : options.named)
    if (named.starts_with('/') && IsAtOrBelow(link, NormalizePath(named)))
      return "it lies inside " + NormalizePath(named) + ", a path this job is given";
  if (!judge(dir.path))
    return "a grant follows links only in the system's own directories (/, /usr, /bin, /sbin, /lib*, /var, "
           "/etc/alternatives); anyone who could write in " +
           dir.path + " could have planted it";
  if (!dir.roots_alone || st.st_uid != 0)
    return "it, or a directory above it, is not root's alone (owned by another user, or writable by group or "
           "others), so someone else could have planted it";
  return "";
}

// A path with no link and no ".." on it, opened whole with no link
// followed (open_no_symlinks.h): what nearly every grant names, in one
// system call where the walk below makes three per component, and atomic
// where the walk is a series of steps. Anything else takes the walk, which
// judges each link and says which component failed: a link anywhere (the
// open refuses it), "..", a path below a directory whose mount points may
// not be crossed, or any failure of the open at all (a missing component, a
// file where a directory was named, a kernel without openat2 whose
// fallback walk refused something).
std::optional<ResolvedPath> ResolveWithoutLinks(const std::string& raw, const ResolveOptions& options) {
  // The test-only build's launcher that resolves as realpath(3) does (its
  // open follows links): the walk, which names where each one led.
  if (FaultSkipStep("grant-links")) return std::nullopt;
  const auto parts = Components(raw);
  if (std::find(parts.begin(), parts.end(), "..") != parts.end()) return std::nullopt;
  const std::string path = NormalizePath(raw);
  for (const auto& grant : options.no_xdev_below)
    if (IsAtOrBelow(path, grant)) return std::nullopt;
  const UniqueFd fd(OpenNoSymlinksAt(AT_FDCWD, path.c_str(), O_PATH));
  struct stat st {};
  if (!fd.valid() || fstat(fd.get(), &st) != 0) return std::nullopt;
  return ResolvedPath{path, FileId{st.st_dev, st.st_ino}, static_cast<mode_t>(st.st_mode & S_IFMT), {}};
}

Error Refused(const std::string& what) { return Error{"", what}; }

std::string Errno(int err) { return strerror(err); }

// A system call on `path` failed with `err`: a shortage of resources says
// so in its `where` (expected.h), anything else is a refusal of the path.
Error Failed(const std::string& path, int err) {
  return Error{IsResourceShortage(err) ? kResourceShortage : "", path + ": " + Errno(err)};
}

}  // namespace

bool IsTrustedLinkDirectory(const std::string& dir) {
  for (const auto& t : kTrustedLinkDirs)
    if (t.below ? IsAtOrBelow(dir, t.dir) : dir == t.dir) return true;
  return false;
}

std::string NormalizePath(const std::string& absolute) {
  std::vector<std::string> parts;
  for (auto& part : Components(absolute)) {
    if (part != "..")
      parts.push_back(std::move(part));
    else if (!parts.empty())
      parts.pop_back();
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

Expected<ResolvedPath> ResolveGrantPath(const std::string& raw, const ResolveOptions& options) {
  return ResolveGrantPathJudged(raw, options, IsTrustedLinkDirectory);
}

Expected<ResolvedPath> ResolveGrantPathJudged(const std::string& raw, const ResolveOptions& options,
                                              LinkDirectoryJudge judge) {
  if (raw.empty() || raw[0] != '/') return Refused("expected an absolute path, got \"" + raw + "\"");
  if (raw.size() >= PATH_MAX || raw.find('\0') != std::string::npos) return Refused("expected a valid path");
  if (auto whole = ResolveWithoutLinks(raw, options)) return *std::move(whole);
  std::vector<Level> stack;
  stack.push_back(Level{UniqueFd(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)), "/"});
  struct stat st {};
  if (!stack.back().fd.valid() || fstat(stack.back().fd.get(), &st) != 0) return Failed("/", errno);
  stack.back().roots_alone = RootsAlone(st);
  ResolvedPath out;
  std::deque<std::string> pending;
  PushFront(raw, pending);
  while (!pending.empty()) {
    const std::string name = std::move(pending.front());
    pending.pop_front();
    if (name == "..") {
      if (stack.size() > 1) stack.pop_back();
      continue;
    }
    const Level& dir = stack.back();
    const std::string here = Join(dir.path, name);
    if (fstatat(dir.fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return Refused("no such file or directory: " + raw + (here == raw ? "" : " (" + here + ")"));
      return Failed(here, errno);
    }
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      const ssize_t n = readlinkat(dir.fd.get(), name.c_str(), target, sizeof target - 1);
      if (n < 0) return Failed(here, errno);
      target[n] = '\0';
      const std::string link = here + " is a symbolic link (to " + target + ")";
      if (const std::string why = WhyNotFollow(dir, here, st, options, judge); !why.empty())
        return Refused(link + ", refused: " + why + "; name the directory it leads to instead");
      if (out.links.size() >= kMaxLinks) return Refused(here + ": " + Errno(ELOOP));
      out.links.push_back(here);
      if (target[0] == '/') stack.resize(1);
      PushFront(target, pending);
      continue;
    }
    bool no_xdev = false;
    for (const auto& grant : options.no_xdev_below) no_xdev = no_xdev || IsAtOrBelow(dir.path, grant);
    UniqueFd fd(OpenNoSymlinksAt(dir.fd.get(), name.c_str(), O_PATH, no_xdev));
    if (!fd.valid()) {
      const int err = errno;
      if (err == ELOOP) return Refused(here + ": became a symbolic link while it was resolved");
      if (err == EXDEV) return Refused(here + ": a mount point inside the grant, which a grant never crosses");
      return Failed(here, err);
    }
    if (fstat(fd.get(), &st) != 0) return Failed(here, errno);
    if (!pending.empty() && !S_ISDIR(st.st_mode)) return Refused(here + ": not a directory");
    const bool roots_alone = stack.back().roots_alone && RootsAlone(st);
    stack.push_back(Level{std::move(fd), here, roots_alone});
  }
  if (fstat(stack.back().fd.get(), &st) != 0) return Failed(stack.back().path, errno);
  out.path = stack.back().path;
  out.inode = FileId{st.st_dev, st.st_ino};
  out.type = st.st_mode & S_IFMT;
  return out;
}

}  // namespace oarbank
