// Reads a small text file (a policy, a manifest, a /proc or /sys knob) in
// chunks, stopping just past `max_bytes` so the caller's parser refuses an
// oversized file by its size. Chunks, not a buffer of max_bytes: zero-filling
// the limit up front costs more than the rest of a launch. Plain read(2):
// a launch pays for every page of code it touches, and iostreams bring many.
//
// Only a regular file is read: the open never blocks (O_NONBLOCK, so a FIFO
// with no writer opens at once) and anything fstat does not call regular (a
// FIFO, a socket, a device, a directory) is refused before the first read,
// never waited on. /proc and /sys files are regular files.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace oarbank {

// What a non-regular file is, for the one line that refuses it.
inline const char* FileKindName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// An fd (O_RDONLY, close-on-exec, blocking again) on a regular file; -1 and
// `why` ("No such file or directory", "not a regular file (a FIFO)")
// otherwise. Never blocks in open.
inline int OpenRegularFile(const std::string& path, std::string* why) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    // A socket cannot be opened at all (ENXIO): name what it is.
    const int err = errno;
    struct stat st {};
    if (why)
      *why = stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)
                 ? std::string("not a regular file (") + FileKindName(st.st_mode) + ")"
                 : std::string(strerror(err));
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    if (why) *why = std::string("cannot stat: ") + strerror(errno);
    close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    if (why) *why = std::string("not a regular file (") + FileKindName(st.st_mode) + ")";
    close(fd);
    return -1;
  }
  // Blocking again: of the status flags F_SETFL sets, the open asked only
  // for O_NONBLOCK, so clearing them all clears just that.
  fcntl(fd, F_SETFL, 0);
  return fd;
}

// nullopt (and `why`, if given) when the file is not a regular file or
// cannot be opened or read.
inline std::optional<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes, std::string* why = nullptr) {
  const int fd = OpenRegularFile(path, why);
  if (fd < 0) return std::nullopt;
  std::string text;
  char chunk[16384];
  while (text.size() <= max_bytes) {
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (why) *why = std::string("cannot read: ") + strerror(errno);
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// A file of the host the agent decides something by (/etc/passwd, a
// subordinate id file): read whole, up to `max_bytes`, and told apart as
// absent (the only answer a caller may take as "nothing there"),
// unreadable (any other failure, a file that is not regular, one larger
// than the limit) or read. Whether the text is well formed is the caller's
// parser; a caller refuses on unreadable and on malformed alike.
enum class HostFileStatus { kRead, kAbsent, kUnreadable };
struct HostFile {
  HostFileStatus status = HostFileStatus::kUnreadable;
  std::string text;
  std::string why;  // for kAbsent and kUnreadable: "<path>: <what>"
};

inline HostFile ReadHostFile(const std::string& path, size_t max_bytes) {
  HostFile f;
  std::string why;
  auto text = ReadFileUpTo(path, max_bytes, &why);
  if (!text) {
    struct stat st {};
    const bool absent = lstat(path.c_str(), &st) != 0 && errno == ENOENT;
    f.status = absent ? HostFileStatus::kAbsent : HostFileStatus::kUnreadable;
    f.why = path + ": " + (absent ? std::string("absent") : why);
    return f;
  }
  if (text->size() > max_bytes) {
    f.why = path + ": larger than " + std::to_string(max_bytes) + " bytes";
    return f;
  }
  f.status = HostFileStatus::kRead;
  f.text = std::move(*text);
  return f;
}

}  // namespace oarbank
