/* A GPU device node, read-write: kernel driver attack surface (ioctls into
 * DRM/KFD/NVIDIA drivers). Only devices.gpu = "compute" grants the nodes
 * (/dev/dri, /dev/kfd, /dev/nvidia*, with IOCTL_DEV); without it Landlock
 * refuses the open with EACCES. Under runner_gpu this is a positive control. */
#include <fcntl.h>

#include "probe.h"

int main(void) {
  const char *node = probe_env("OARBANK_PROBE_GPU_NODE");
  int fd = open(node, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s read-write", node);
  close(fd);
  escaped("opened %s read-write", node);
}
