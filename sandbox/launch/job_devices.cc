#include "sandbox/launch/job_devices.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "sandbox/common/fault_hooks.h"
#include "sandbox/common/send_fd.h"
#include "sandbox/plan/plan.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

namespace oarbank {

int MountJobDevices(const JobDevices& devices, const char** what) {
  if (!devices.enabled) return 0;
  // Test builds only (common/fault_hooks.h): leaves the mounts out, so a
  // test shows the supervisor's gate refusing a job whose /dev/pts and
  // /dev/shm are not its own.
  if (FaultSkipStep("job-devices")) return 0;
  // A devpts instance of the job's own, never the host's: its ptys are the
  // only ones /dev/pts lists. Not nodev: its nodes are the ptys.
  if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") != 0) {
    *what = "mount a devpts instance on /dev/pts";
    return errno;
  }
  // /dev/ptmx opens the instance's ptmx, whatever the host's node is.
  if (mount("/dev/pts/ptmx", "/dev/ptmx", nullptr, MS_BIND, nullptr) != 0) {
    *what = "bind /dev/pts/ptmx on /dev/ptmx";
    return errno;
  }
  char options[96];
  snprintf(options, sizeof options, "size=%llu,nr_inodes=%u,mode=1777",
           static_cast<unsigned long long>(devices.shm_bytes), devices.shm_inodes);
  if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) != 0) {
    *what = "mount a tmpfs on /dev/shm";
    return errno;
  }
  // What the job will reach by name is what was mounted.
  struct statfs pts {
  }, shm{};
  struct stat ptmx {
  }, pts_root{};
  if (statfs("/dev/pts", &pts) != 0 || statfs("/dev/shm", &shm) != 0 || stat("/dev/ptmx", &ptmx) != 0 ||
      stat("/dev/pts", &pts_root) != 0) {
    *what = "check the job's /dev/pts, /dev/ptmx and /dev/shm";
    return errno;
  }
  if (pts.f_type != DEVPTS_SUPER_MAGIC || ptmx.st_dev != pts_root.st_dev) {
    *what = "/dev/pts and /dev/ptmx are not the job's devpts instance after the mount";
    return EIO;
  }
  if (shm.f_type != TMPFS_MAGIC || (shm.f_flags & ST_RDONLY) || !(shm.f_flags & ST_NOEXEC)) {
    *what = "/dev/shm is not the job's writable noexec tmpfs after the mount";
    return EIO;
  }
  return 0;
}

int OpenJobTerminal(int gate_fd, const char** what) {
  const int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) {
    *what = "open /dev/ptmx";
    return errno;
  }
  int unlock = 0;
  int err = 0;
  const int peer = ioctl(master, TIOCSPTLCK, &unlock) == 0 ? ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY) : -1;
  if (peer < 0) {
    err = errno;
    *what = "open the pty's peer";
  } else if (ioctl(peer, TIOCSCTTY, 0) != 0) {
    err = errno;
    *what = "make the pty the controlling terminal";
  } else if (dup2(peer, 0) < 0 || dup2(peer, 1) < 0 || dup2(peer, 2) < 0) {
    err = errno;
    *what = "make the pty stdin, stdout and stderr";
  } else {
    // The master goes to the supervisor, which relays it; nothing of the
    // job keeps it.
    if ((err = SendFd(gate_fd, kGateTerminal, master)) != 0) {
      *what = "hand the pty to the supervisor";
    }
  }
  if (peer > 2) close(peer);
  close(master);
  return err;
}

}  // namespace oarbank
