/* A file made beside the GPU nodes: devices.gpu grants the directory that
 * holds them (/dev/dri: read it to find the render nodes) and the nodes
 * read-write, never a right to add or replace a node there. The read-only
 * mounts refuse it (EROFS) under every policy; Landlock refuses it behind
 * them (no MAKE_REG on the directory). Unconfined, as root, the file is
 * made in the harness's stand-in /dev/dri (a tmpfs of its own mount
 * namespace) and removed at once. */
#include <libgen.h>

#include "probe.h"

int main(void) {
  char node[4096];
  snprintf(node, sizeof node, "%s", probe_env("OARBANK_PROBE_GPU_NODE"));
  verdict_create_in(dirname(node), "beside the GPU nodes");
}
