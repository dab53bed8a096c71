/* Reading the base system's root-only files (/etc/shadow, SSH host keys,
 * sudoers): the base system grants /etc for reading, and a module running as
 * root owns those files, so file permissions do not stop it. The cage shows
 * root an idmapped /etc in which root owns nothing (EACCES from the file
 * permissions), or, where the kernel cannot idmap, grants root only the
 * world-readable parts of /etc (EACCES from Landlock); uid 65534 is refused
 * by the file permissions themselves. */
#include <fcntl.h>
#include <glob.h>

#include "probe.h"

int main(void) {
  const char *fixed[] = {"/etc/shadow", "/etc/gshadow", "/etc/sudoers", NULL};
  glob_t keys;
  int have_keys = glob("/etc/ssh/ssh_host_*_key", 0, NULL, &keys) == 0;
  int first_err = 0, tried = 0;
  const char *first_path = "";
  for (size_t i = 0;; ++i) {
    const char *path = fixed[i] ? fixed[i] : (have_keys && i - 3 < keys.gl_pathc ? keys.gl_pathv[i - 3] : NULL);
    if (path == NULL) break;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      if (first_err == 0) {
        first_err = errno;
        first_path = path;
      }
      ++tried;
      continue;
    }
    char c;
    if (read(fd, &c, 1) >= 0) escaped("read %s (a root-only file of the base system)", path);
    close(fd);
  }
  if (tried == 0) unsupported("none of /etc/shadow, /etc/gshadow, /etc/sudoers, /etc/ssh/ssh_host_*_key exists here");
  blocked(first_err, "open %s", first_path);
}
