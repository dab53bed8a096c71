/* Device nodes beyond the five the base system grants (null, zero, random,
 * urandom, full): a controlling terminal, the kernel log, new ptys, raw
 * memory and disks, the console, and shared memory in /dev/shm. Landlock
 * grants /dev nothing else: opening any of them read-write (or creating a
 * file in /dev/shm) is refused with EACCES. Escaped if any one opens; nodes
 * this host lacks are skipped. Nothing is written to any node. Under the
 * supervisor ($OARBANK_PROBE_SUPERVISED) the job has a devpts instance and a
 * /dev/shm of its own, granted to it with /dev/tty (a job's controlling
 * terminal is a pty of its own devpts): those three are left to
 * job_host_pty and job_host_shm, which show they are not the host's. */
#include <fcntl.h>
#include <sys/stat.h>

#include "probe.h"

static const char *const kNodes[] = {
    "/dev/tty",   "/dev/ptmx",        "/dev/kmsg", "/dev/mem",     "/dev/kmem",   "/dev/port",
    "/dev/console", "/dev/tty0",      "/dev/vda",  "/dev/sda",     "/dev/nvme0n1", "/dev/loop-control",
    "/dev/fuse",  "/dev/userfaultfd", "/dev/vsock", "/dev/vhost-vsock", "/dev/kvm", "/dev/net/tun",
    "/dev/cpu/0/msr", "/dev/vcs",
};

int main(void) {
  char opened[400] = "";
  int first_err = 0;
  const char *first_node = NULL;
  int tried = 0;
  const char *supervised = getenv("OARBANK_PROBE_SUPERVISED");
  const int job_devices = supervised != NULL && strcmp(supervised, "1") == 0;
  for (size_t i = 0; i < sizeof kNodes / sizeof kNodes[0]; ++i) {
    struct stat st;
    if (job_devices && (strcmp(kNodes[i], "/dev/ptmx") == 0 || strcmp(kNodes[i], "/dev/tty") == 0)) continue;
    if (stat(kNodes[i], &st) != 0) continue;
    ++tried;
    int fd = open(kNodes[i], O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      size_t len = strlen(opened);
      snprintf(opened + len, sizeof opened - len, "%s%s", len ? " " : "", kNodes[i]);
      continue;
    }
    if (first_err == 0) {
      first_err = errno;
      first_node = kNodes[i];
    }
  }
  /* A new file in /dev/shm: shared memory outside the grants. */
  char shm[128];
  snprintf(shm, sizeof shm, "/dev/shm/%s.%d", PROBE_NAME, (int)getpid());
  struct stat st;
  if (!job_devices && stat("/dev/shm", &st) == 0) {
    ++tried;
    int fd = open(shm, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      close(fd);
      unlink(shm);
      size_t len = strlen(opened);
      snprintf(opened + len, sizeof opened - len, "%s%s", len ? " " : "", shm);
    } else if (first_err == 0) {
      first_err = errno;
      first_node = shm;
    }
  }
  if (opened[0]) escaped("opened read-write: %s", opened);
  if (tried == 0) probe_error("none of the device nodes exists on this host");
  blocked(first_err, "%d node(s) tried, none opened; first refusal: %s", tried, first_node);
}
