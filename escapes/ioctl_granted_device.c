/* A device-specific ioctl on a device the policy grants (/dev/urandom): a
 * granted device node is for reading and writing, and its driver's ioctls
 * (on /dev/urandom, the entropy count; on other nodes, far more) are
 * kernel surface past that. Landlock's IOCTL_DEV right is not granted on
 * the base devices: EACCES. */
#include <linux/random.h>
#include <sys/ioctl.h>

#include "probe.h"

int main(void) {
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) probe_error("open /dev/urandom: %s", strerror(errno));
  int count = 0;
  if (ioctl(fd, RNDGETENTCNT, &count) != 0) blocked(errno, "ioctl(/dev/urandom, RNDGETENTCNT)");
  escaped("ioctl(/dev/urandom, RNDGETENTCNT) answered %d", count);
}
