/* A file made beside the GPU nodes: devices.gpu grants the directory that
 * holds them (/dev/dri: read it to find the render nodes) and the nodes
 * read-write, never a right to add or replace a node there. The read-only
 * mounts refuse it (EROFS) under every policy; Landlock refuses it behind
 * them (no MAKE_REG on the directory). Unconfined, as root, the file is
 * made in the harness's stand-in /dev/dri (a tmpfs of its own mount
 * namespace) and removed at once. */
#include <fcntl.h>
#include <libgen.h>

#include "probe.h"

int main(void) {
  char node[4096], path[4096];
  snprintf(node, sizeof node, "%s", probe_env("OARBANK_PROBE_GPU_NODE"));
  snprintf(path, sizeof path, "%s/%s.%d", dirname(node), PROBE_NAME, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) blocked(errno, "create %s", path);
  close(fd);
  unlink(path);
  escaped("created %s beside the GPU nodes", path);
}
