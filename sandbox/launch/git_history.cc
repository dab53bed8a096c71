#include "sandbox/launch/git_history.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/grant_path.h"
#include "sandbox/common/open_no_symlinks.h"
#include "sandbox/common/unique_fd.h"

namespace oarbank {
namespace {

constexpr char kPlanted[] = "a symbolic link is on the way (refused: whoever could write there could have planted it)";

Error Bad(const std::string& where, const std::string& what) { return Error{where, what}; }

std::string Join(const std::string& dir, const std::string& name) { return dir == "/" ? "/" + name : dir + "/" + name; }

std::string Absolute(const std::string& path, const std::string& base) {
  return NormalizePath(path[0] == '/' ? path : base + "/" + path);
}

// A regular file `name` in `dir` of at most `max` bytes, never through a
// link; nothing when it does not exist.
Expected<std::optional<std::string>> ReadFileIn(int dir, const char* name, const std::string& shown, size_t max) {
  UniqueFd fd(openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return std::optional<std::string>();
    if (err == ELOOP) return Bad(shown, std::string("a symbolic link: ") + kPlanted);
    return Bad(shown, strerror(err));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Bad(shown, strerror(errno));
  if (!S_ISREG(st.st_mode)) return Bad(shown, "not a regular file");
  std::string text(max + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Bad(shown, strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max) return Bad(shown, "larger than " + std::to_string(max) + " bytes");
  text.resize(got);
  return std::optional<std::string>(text);
}

// A pointer file's one line (a path, or "gitdir: PATH"); nothing when absent.
Expected<std::optional<std::string>> ReadLineIn(int dir, const char* name, const std::string& shown) {
  auto text = ReadFileIn(dir, name, shown, kGitPointerMaxBytes);
  if (!text.ok() || !text.value()) return text;
  std::string line = *text.value();
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.empty() || line.find_first_of(std::string("\n\r\0", 3)) != std::string::npos)
    return Bad(shown, "expected one line naming a path");
  return std::optional<std::string>(line);
}

// A directory a pointer names, resolved as a grant path is.
Expected<ResolvedPath> ResolveDirectory(const std::string& path, const std::string& where) {
  auto r = ResolveGrantPath(path);
  if (!r.ok()) return Bad(where, r.error().what);
  if (r.value().type != S_IFDIR) return Bad(where, path + ": not a directory");
  return r;
}

UniqueFd OpenDirectory(const std::string& canonical) {
  return UniqueFd(OpenNoSymlinksAt(AT_FDCWD, canonical.c_str(), O_PATH | O_DIRECTORY));
}

bool HasEntry(int dir, const char* name, mode_t type) {
  struct stat st {};
  return fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && (st.st_mode & S_IFMT) == type;
}

// The inode `path` (read from a file in `base`) leads to, or an unknown id.
FileId InodeNamed(const std::string& path, const std::string& base) {
  auto r = ResolveGrantPath(Absolute(path, base));
  return r.ok() ? r.value().inode : FileId{};
}

FileId InodeOf(int dir, const char* name) {
  struct stat st {};
  if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return FileId{};
  return FileId{st.st_dev, st.st_ino};
}

// The git directory's common directory: its commondir, which must hold it
// as worktrees/<name> (git's own tie between the two), or itself.
Expected<std::string> ResolveCommonDir(const std::string& git_dir, int git_fd, const FileId& git_inode) {
  auto common = ReadLineIn(git_fd, "commondir", git_dir + "/commondir");
  if (!common.ok()) return common.error();
  if (!common.value()) return git_dir;
  auto dir = ResolveDirectory(Absolute(*common.value(), git_dir), git_dir + "/commondir");
  if (!dir.ok()) return dir.error();
  const UniqueFd fd = OpenDirectory(dir.value().path);
  const std::string name = git_dir.substr(git_dir.rfind('/') + 1);
  const UniqueFd worktrees(fd.valid() ? openat(fd.get(), "worktrees", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                      : -1);
  if (FaultSkipStep("git-back-pointers")) return dir.value().path;
  if (!worktrees.valid() || !(InodeOf(worktrees.get(), name.c_str()) == git_inode))
    return Bad(git_dir + "/commondir",
               "names " + dir.value().path + ", which does not hold " + git_dir + " as worktrees/" + name);
  return dir.value().path;
}

// HEAD in the git directory, objects/ and refs/ in the common one: what git
// asks of a directory before it takes it for a repository.
bool IsGitDirectory(int git_fd, const std::string& common_dir) {
  const UniqueFd common = OpenDirectory(common_dir);
  return HasEntry(git_fd, "HEAD", S_IFREG) && common.valid() && HasEntry(common.get(), "objects", S_IFDIR) &&
         HasEntry(common.get(), "refs", S_IFDIR);
}

// Whether the git directory names `worktree` back: a linked worktree's
// gitdir file names <worktree>/.git (with a commondir), a submodule's config
// sets core.worktree to the worktree.
Expected<bool> NamesWorktreeBack(const std::string& git_dir, int git_fd, bool linked, const FileId& dot_git,
                                 const FileId& worktree) {
  if (linked) {
    auto back = ReadLineIn(git_fd, "gitdir", git_dir + "/gitdir");
    if (!back.ok()) return back.error();
    return back.value() && InodeNamed(*back.value(), git_dir) == dot_git;
  }
  auto config = ReadFileIn(git_fd, "config", git_dir + "/config", kGitConfigMaxBytes);
  if (!config.ok()) return config.error();
  if (!config.value()) return false;
  const auto named = GitConfigValue(*config.value(), "core", "worktree");
  return named && !named->empty() && InodeNamed(*named, git_dir) == worktree;
}

}  // namespace

std::vector<std::string> GitCarveOuts::Paths() const {
  std::vector<std::string> out{dot_git};
  if (git_dir != dot_git) out.push_back(git_dir);
  if (common_dir != dot_git && common_dir != git_dir) out.push_back(common_dir);
  return out;
}

Expected<std::optional<GitCarveOuts>> ResolveGitCarveOuts(const std::string& worktree, const std::string& git_dir) {
  const UniqueFd wt = OpenDirectory(worktree);
  if (!wt.valid()) return Bad("worktree", worktree + ": " + (errno == ELOOP ? kPlanted : strerror(errno)));
  GitCarveOuts out;
  out.dot_git = Join(worktree, ".git");
  struct stat st {
  }, wt_st{};
  if (fstat(wt.get(), &wt_st) != 0) return Bad("worktree", strerror(errno));
  if (fstatat(wt.get(), ".git", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return Bad(out.dot_git, strerror(errno));
    if (!git_dir.empty()) return Bad(out.dot_git, "missing: --git-dir names the git directory a .git file points to");
    return std::optional<GitCarveOuts>();
  }
  const FileId dot_git{st.st_dev, st.st_ino};
  std::optional<ResolvedPath> named;  // the caller's git directory
  if (!git_dir.empty()) {
    auto r = ResolveDirectory(git_dir, "--git-dir");
    if (!r.ok()) return r.error();
    named = r.value();
  }
  if (S_ISLNK(st.st_mode)) return Bad(out.dot_git, std::string("a symbolic link: ") + kPlanted);
  UniqueFd git_fd;
  FileId git_inode = dot_git;
  if (S_ISDIR(st.st_mode)) {
    out.git_dir = out.dot_git;
    git_fd.Reset(openat(wt.get(), ".git", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!git_fd.valid()) return Bad(out.dot_git, errno == ENOTDIR ? kPlanted : strerror(errno));
    if (named && !(named->inode == dot_git)) return Bad("--git-dir", git_dir + " is not " + out.dot_git);
    if ((HasEntry(git_fd.get(), "commondir", S_IFREG) || HasEntry(git_fd.get(), "commondir", S_IFLNK)) &&
        !FaultSkipStep("git-back-pointers"))
      return Bad(out.dot_git + "/commondir",
                 "a .git directory with a commondir, which git writes only in a linked "
                 "worktree's git directory: refused (it could name any directory)");
  } else if (S_ISREG(st.st_mode)) {
    out.pointer = true;
    auto text = ReadLineIn(wt.get(), ".git", out.dot_git);
    if (!text.ok()) return text.error();
    constexpr std::string_view kPrefix = "gitdir: ";
    if (!text.value() || text.value()->compare(0, kPrefix.size(), kPrefix) != 0 ||
        text.value()->size() == kPrefix.size())
      return Bad(out.dot_git, "a file that does not say \"gitdir: PATH\"");
    auto target = ResolveDirectory(Absolute(text.value()->substr(kPrefix.size()), worktree), out.dot_git + " (gitdir)");
    if (!target.ok()) return target.error();
    out.git_dir = target.value().path;
    git_inode = target.value().inode;
    if (named && !(named->inode == git_inode))
      return Bad(out.dot_git, "points to " + out.git_dir + ", not to --git-dir " + named->path);
    git_fd = OpenDirectory(out.git_dir);
    if (!git_fd.valid()) return Bad(out.dot_git + " (gitdir)", out.git_dir + ": " + strerror(errno));
  } else {
    return Bad(out.dot_git, "neither a directory nor a regular file");
  }
  auto common = ResolveCommonDir(out.git_dir, git_fd.get(), git_inode);
  if (!common.ok()) return common.error();
  out.common_dir = common.value();
  if (!out.pointer || named || FaultSkipStep("git-back-pointers")) return std::optional<GitCarveOuts>(out);
  const std::string refused = "points to " + out.git_dir + ", which is not a git directory that lists this worktree";
  if (!IsGitDirectory(git_fd.get(), out.common_dir)) return Bad(out.dot_git, refused + " (pass --git-dir if it is)");
  auto back = NamesWorktreeBack(out.git_dir, git_fd.get(), out.common_dir != out.git_dir, dot_git,
                                FileId{wt_st.st_dev, wt_st.st_ino});
  if (!back.ok()) return back.error();
  if (!back.value()) return Bad(out.dot_git, refused + " (pass --git-dir if it is)");
  return std::optional<GitCarveOuts>(out);
}

std::string EnclosingCheckout(const std::string& worktree) {
  std::string dir = NormalizePath(worktree);
  while (dir != "/") {
    dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1));
    struct stat st {};
    if (lstat(Join(dir, ".git").c_str(), &st) == 0) return dir;
  }
  return "";
}

std::optional<std::string> GitConfigValue(const std::string& text, const std::string& section, const std::string& key) {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
  };
  std::optional<std::string> value;
  std::string current;  // the section a key line belongs to, lower-cased ("core", or "core \"sub\"")
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size()) break;
    if (text[i] == '#' || text[i] == ';') {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
      continue;
    }
    if (text[i] == '[') {
      const size_t end = text.find(']', i);
      if (end == std::string::npos) return std::nullopt;  // git refuses such a file
      current = lower(text.substr(i + 1, end - i - 1));
      i = end + 1;
      continue;
    }
    size_t k = i;
    while (k < text.size() && (std::isalnum(static_cast<unsigned char>(text[k])) || text[k] == '-')) ++k;
    const std::string name = lower(text.substr(i, k - i));
    while (k < text.size() && (text[k] == ' ' || text[k] == '\t')) ++k;
    std::string v;
    if (k < text.size() && text[k] == '=') {
      ++k;
      bool quoted = false;
      std::string pending_space;
      for (; k < text.size(); ++k) {
        const char c = text[k];
        if (c == '\n' && !quoted) break;
        if (c == '\\' && k + 1 < text.size()) {
          const char e = text[++k];
          if (e == '\n') continue;  // continuation
          v += pending_space + (e == 'n' ? '\n' : e == 't' ? '\t' : e == 'b' ? '\b' : e);
          pending_space.clear();
          continue;
        }
        if (c == '"') {
          quoted = !quoted;
          continue;
        }
        if (!quoted && (c == '#' || c == ';')) {
          k = text.find('\n', k);
          if (k == std::string::npos) k = text.size();
          break;
        }
        if (!quoted && (c == ' ' || c == '\t' || c == '\r')) {
          if (!v.empty()) pending_space += c;
          continue;
        }
        v += pending_space + c;
        pending_space.clear();
      }
      if (quoted) return std::nullopt;  // git refuses an unterminated quote
    } else {
      k = text.find('\n', k);
      if (k == std::string::npos) k = text.size();
    }
    if (current == lower(section) && name == lower(key)) value = v;
    i = k;
  }
  return value;
}

}  // namespace oarbank
