/* File handles skip path resolution: name_to_handle_at() on the secret (no
 * open needed, so Landlock is not asked) and open_by_handle_at() would open
 * the inode without any path-based rule seeing a path outside the grants.
 * The seccomp filter refuses open_by_handle_at with EPERM. If the handle
 * cannot be made, a dummy handle still shows whether the call reaches the
 * kernel (it answers ESTALE/EINVAL/EBADF/EPERM-for-no-capability there). */
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

#include "probe.h"

int main(void) {
  const char *secret = probe_env("OARBANK_PROBE_SECRET");
  /* The mount fd names the filesystem to decode the handle on: a directory
   * on the secret's filesystem that this process may open (O_PATH fds are
   * not accepted). Confined, the secret's own directory is refused, but a
   * granted one on the same filesystem serves as well. */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", secret);
  const char *candidates[] = {dirname(dir), getenv("OARBANK_PROBE_BUNDLE"), getenv("OARBANK_PROBE_WRITABLE"), "."};
  struct stat secret_st;
  if (stat(secret, &secret_st) != 0) probe_error("stat %s: %s", secret, strerror(errno));
  int mount_fd = AT_FDCWD;
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; ++i) {
    struct stat st;
    if (candidates[i] == NULL || stat(candidates[i], &st) != 0 || st.st_dev != secret_st.st_dev) continue;
    int fd = open(candidates[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      mount_fd = fd;
      break;
    }
  }

  struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
  if (fh == NULL) probe_error("malloc");
  fh->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  const char *made = "a handle of the secret";
  if (name_to_handle_at(AT_FDCWD, secret, fh, &mount_id, 0) != 0) {
    made = "a dummy handle (name_to_handle_at failed)";
    fh->handle_bytes = 8;
    fh->handle_type = 1;
    memset(fh->f_handle, 0, 8);
  }
  int fd = open_by_handle_at(mount_fd, fh, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    escaped("open_by_handle_at(%s) opened it; read %zd bytes", made, n);
  }
  int err = errno;
  if (err == EPERM) blocked(err, "open_by_handle_at(%s) refused", made);
  escaped("open_by_handle_at(%s) reached the kernel: %s", made, probe_errno_name(err));
}
