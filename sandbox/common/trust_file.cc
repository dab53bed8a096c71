#include "sandbox/common/trust_file.h"

#include "sandbox/common/read_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace oarbank {
namespace {

std::string ErrnoText(int err) { return strerror(err); }

bool TrustedOwner(uid_t uid) { return uid == 0 || uid == geteuid(); }

// "" when a directory with this status may hold trust files.
std::string CheckDirectory(const std::string& path, const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
  if (!TrustedOwner(st.st_uid))
    return path + " is owned by uid " + std::to_string(st.st_uid) + " (only root or uid " + std::to_string(geteuid()) +
           " may own it)";
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (others_write && !(st.st_uid == 0 && (st.st_mode & S_ISVTX)))
    return path + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " + [&] {
      char m[8];
      snprintf(m, sizeof m, "%04o", st.st_mode & 07777);
      return std::string(m);
    }() + ")";
  return "";
}

// "" when a file with this status may be trusted.
std::string CheckFile(const std::string& path, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link";
  if (!S_ISREG(st.st_mode)) return path + " is not a regular file (" + FileKindName(st.st_mode) + ")";
  if (!TrustedOwner(st.st_uid))
    return path + " is owned by uid " + std::to_string(st.st_uid) + " (only root or uid " + std::to_string(geteuid()) +
           " may own it)";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return path + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group");
  if (st.st_nlink != 1) return path + " has " + std::to_string(st.st_nlink) + " hard links";
  return "";
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// Splits "/a/b/c" into "/a/b" and "c".
std::pair<std::string, std::string> SplitPath(const std::string& path) {
  const std::string abs = Absolute(path);
  const auto slash = abs.find_last_of('/');
  return {slash == 0 ? "/" : abs.substr(0, slash), abs.substr(slash + 1)};
}

Error Refuse(const std::string& path, const std::string& what) { return Error{path, what}; }

}  // namespace

Expected<TrustedDir> OpenTrustedDir(const std::string& dir, bool create_last) {
  std::string resolved;
  std::string missing_last;  // created below, when asked
  if (char* real = realpath(Absolute(dir).c_str(), nullptr)) {
    resolved = real;
    free(real);
  } else if (errno == ENOENT && create_last) {
    auto [parent, name] = SplitPath(dir);
    char* real_parent = realpath(parent.c_str(), nullptr);
    if (!real_parent || name.empty() || name == "." || name == "..") {
      free(real_parent);
      return Refuse(dir, "no such directory");
    }
    resolved = std::string(real_parent) + (std::string(real_parent) == "/" ? "" : "/") + name;
    missing_last = name;
    free(real_parent);
  } else {
    return Refuse(dir, errno == ENOENT ? "no such directory" : "cannot resolve: " + ErrnoText(errno));
  }

  UniqueFd fd(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0) return Refuse("/", "cannot open: " + ErrnoText(errno));
  if (auto why = CheckDirectory("/", st); !why.empty()) return Refuse(dir, why);
  std::string walked;
  size_t pos = 1;
  while (pos < resolved.size()) {
    size_t next = resolved.find('/', pos);
    if (next == std::string::npos) next = resolved.size();
    const std::string component = resolved.substr(pos, next - pos);
    pos = next + 1;
    if (component.empty()) continue;
    walked += "/" + component;
    const bool last = pos >= resolved.size();
    if (last && component == missing_last) {
      // 0755 whatever the umask, on the directory made here only: a name
      // that appeared meanwhile is checked below like any other, never chmod'ed
      // (fchmodat would follow a symlink planted in a sticky directory).
      if (mkdirat(fd.get(), component.c_str(), 0755) == 0) {
        UniqueFd made(openat(fd.get(), component.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (made.valid()) fchmod(made.get(), 0755);
      } else if (errno != EEXIST) {
        return Refuse(walked, "cannot create: " + ErrnoText(errno));
      }
    }
    UniqueFd child(openat(fd.get(), component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child.valid())
      return Refuse(walked,
                    errno == ENOTDIR || errno == ELOOP ? "is not a directory" : "cannot open: " + ErrnoText(errno));
    if (fstat(child.get(), &st) != 0) return Refuse(walked, "cannot stat: " + ErrnoText(errno));
    if (auto why = CheckDirectory(walked, st); !why.empty()) return Refuse(dir, why);
    fd = std::move(child);
  }
  return TrustedDir{resolved.empty() ? "/" : resolved, std::move(fd)};
}

namespace {

// The trust file at `path`, open for reading, with its size; nullopt when it
// does not exist (its directories must still pass).
struct OpenedTrustFile {
  UniqueFd fd;
  size_t size = 0;
};
Expected<std::optional<OpenedTrustFile>> OpenTrustedFile(const std::string& path) {
  auto [dir, name] = SplitPath(path);
  if (name.empty() || name == "." || name == "..") return Refuse(path, "is not a file name");
  auto trusted = OpenTrustedDir(dir);
  if (!trusted.ok()) {
    // A directory that does not exist holds no file: the same as a missing file.
    if (trusted.error().what == "no such directory") return std::optional<OpenedTrustFile>{};
    return Refuse(path, "not trusted: " + trusted.error().what);
  }
  // What is there decides first: a symlink, a FIFO, a socket (which cannot
  // even be opened) or a device is named, never opened or waited on.
  struct stat st;
  if (fstatat(trusted.value().fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
    return Refuse(path, "not trusted: " + CheckFile(path, st));
  UniqueFd fd(
      openat(trusted.value().fd.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<OpenedTrustFile>{};
    if (errno == ELOOP) return Refuse(path, "not trusted: " + path + " is a symbolic link");
    return Refuse(path, "cannot open: " + ErrnoText(errno));
  }
  if (fstat(fd.get(), &st) != 0) return Refuse(path, "cannot stat: " + ErrnoText(errno));
  if (auto why = CheckFile(path, st); !why.empty()) return Refuse(path, "not trusted: " + why);
  return std::optional<OpenedTrustFile>(OpenedTrustFile{std::move(fd), static_cast<size_t>(st.st_size)});
}

}  // namespace

Expected<bool> CheckTrustedFile(const std::string& path) {
  auto opened = OpenTrustedFile(path);
  if (!opened.ok()) return opened.error();
  return opened.value().has_value();
}

Expected<std::optional<std::string>> ReadTrustedFile(const std::string& path) {
  auto opened = OpenTrustedFile(path);
  if (!opened.ok()) return opened.error();
  if (!opened.value()) return std::optional<std::string>{};
  const OpenedTrustFile file = *std::move(opened).value();
  if (file.size > kTrustFileMaxBytes)
    return Refuse(path, "is larger than " + std::to_string(kTrustFileMaxBytes) + " bytes");
  std::string text;
  char chunk[16384];
  for (;;) {
    const ssize_t n = read(file.fd.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Refuse(path, "cannot read: " + ErrnoText(errno));
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > kTrustFileMaxBytes)
      return Refuse(path, "is larger than " + std::to_string(kTrustFileMaxBytes) + " bytes");
  }
  return std::optional<std::string>(std::move(text));
}

std::optional<Error> WriteTrustedFile(const std::string& path, const std::string& text, mode_t mode) {
  auto [dir, name] = SplitPath(path);
  if (name.empty() || name == "." || name == "..") return Refuse(path, "is not a file name");
  auto trusted = OpenTrustedDir(dir, /*create_last=*/true);
  if (!trusted.ok()) return Refuse(path, "not trusted: " + trusted.error().what);
  const int dirfd = trusted.value().fd.get();

  // Whatever is there must be a file we could have trusted: a planted link
  // or FIFO is refused, not replaced (its planter learns nothing either way).
  struct stat st;
  if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (auto why = CheckFile(path, st); !why.empty()) return Refuse(path, "not replaced: " + why);
  } else if (errno != ENOENT) {
    return Refuse(path, "cannot stat: " + ErrnoText(errno));
  }

  std::string tmp;
  UniqueFd out;
  for (int attempt = 0; attempt < 16 && !out.valid(); ++attempt) {
    unsigned char random[8];
    if (getrandom(random, sizeof random, 0) != sizeof random) return Refuse(path, "getrandom: " + ErrnoText(errno));
    char suffix[17];
    for (int i = 0; i < 8; ++i) snprintf(suffix + 2 * i, 3, "%02x", random[i]);
    tmp = "." + name + "." + suffix;
    out.Reset(openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out.valid() && errno != EEXIST) return Refuse(path, "cannot create a temporary file: " + ErrnoText(errno));
  }
  if (!out.valid()) return Refuse(path, "cannot create a temporary file: every name was taken");
  auto fail = [&](const std::string& what) {
    const int err = errno;
    unlinkat(dirfd, tmp.c_str(), 0);
    return Refuse(path, what + ": " + ErrnoText(err));
  };
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(out.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    done += static_cast<size_t>(n);
  }
  if (fchmod(out.get(), mode) != 0) return fail("cannot set the mode");
  if (fsync(out.get()) != 0) return fail("cannot fsync");
  out.Reset();
  if (renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) return fail("cannot rename into place");
  UniqueFd sync_dir(openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (sync_dir.valid()) fsync(sync_dir.get());
  return std::nullopt;
}

Expected<TrustLock> TrustLock::Acquire(const std::string& path) {
  auto [dir, name] = SplitPath(path + ".lock");
  auto trusted = OpenTrustedDir(dir, /*create_last=*/true);
  if (!trusted.ok()) return Refuse(path, "not trusted: " + trusted.error().what);
  const std::string lock_path = trusted.value().path + "/" + name;
  // Say what a planted entry is (the kernel's protected_symlinks answers a
  // foreign symlink in a sticky directory with EACCES, not ELOOP).
  struct stat st;
  if (fstatat(trusted.value().fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    if (auto why = CheckFile(lock_path, st); !why.empty()) return Refuse(lock_path, "not trusted: " + why);
  UniqueFd fd(openat(trusted.value().fd.get(), name.c_str(),
                     O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600));
  if (!fd.valid())
    return Refuse(lock_path, errno == ELOOP ? "not trusted: " + lock_path + " is a symbolic link"
                                            : "cannot open the lock: " + ErrnoText(errno));
  if (fstat(fd.get(), &st) != 0) return Refuse(lock_path, "cannot stat: " + ErrnoText(errno));
  if (auto why = CheckFile(lock_path, st); !why.empty()) return Refuse(lock_path, "not trusted: " + why);
  while (flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return Refuse(lock_path, "cannot lock: " + ErrnoText(errno));
  return TrustLock(std::move(fd));
}

}  // namespace oarbank
