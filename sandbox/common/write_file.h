// The one writer for kernel knobs: /proc/<pid>/{uid_map,gid_map,setgroups}
// and cgroup files, each of which takes its whole text in a single write(2).
// Allocation-free, so the job's processes may call it after fork.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace oarbank {

// Writes `text` to the existing file `path`. Returns 0, or an errno (EIO
// for a short write).
inline int WriteWholeFile(const char* path, const char* text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const size_t len = strlen(text);
  const ssize_t n = write(fd, text, len);
  const int err = n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return err;
}

}  // namespace oarbank
