/* A whiteout is a character device 0:0 (overlayfs reads it as "this name
 * was deleted"). renameat2(RENAME_WHITEOUT) and mknod(S_IFCHR, 0:0) make
 * one without CAP_MKNOD since Linux 5.8, so a job could make a device node
 * in a writable grant, and a whiteout left in a directory that a later
 * overlay mounts as a layer hides the name it covers. Which Landlock right
 * a whiteout needs is the kernel's Landlock erratum 4: without the fix,
 * renameat2's whiteout needs only MAKE_REG (the writable grants have it);
 * with it, mknod's needs MAKE_REG too where it needed MAKE_CHAR. The
 * seccomp filter refuses RENAME_WHITEOUT and mknod/mknodat of a character
 * device 0:0 itself (EPERM), so no kernel's answer decides it. Unconfined
 * as root each is made: escaped. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "probe.h"

#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

int main(void) {
  const char* dir = probe_env("OARBANK_PROBE_WRITABLE");
  char from[4096], to[4096], node[4096];
  snprintf(from, sizeof from, "%s/%s.%d.from", dir, PROBE_NAME, (int)getpid());
  snprintf(to, sizeof to, "%s/%s.%d.to", dir, PROBE_NAME, (int)getpid());
  snprintf(node, sizeof node, "%s/%s.%d.node", dir, PROBE_NAME, (int)getpid());
  int fd = open(from, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) probe_error("cannot make %s in the writable grant: %s", from, strerror(errno));
  close(fd);
  long rc = syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_WHITEOUT);
  int rename_err = errno;
  struct stat st;
  int made = rc == 0 && lstat(from, &st) == 0 && S_ISCHR(st.st_mode);
  unlink(from);
  unlink(to);
  if (made) escaped("renameat2(RENAME_WHITEOUT) left a whiteout (char 0:0) in a writable grant");
  if (rc == 0) probe_error("renameat2(RENAME_WHITEOUT) succeeded but left no whiteout at %s", from);
  int mknod_err = 0;
#ifdef SYS_mknod
  if (syscall(SYS_mknod, node, S_IFCHR | 0600, 0) == 0) {
    unlink(node);
    escaped("mknod(S_IFCHR, 0:0) made a whiteout in a writable grant (renameat2: %s)", probe_errno_name(rename_err));
  }
  mknod_err = errno;
#endif
  if (syscall(SYS_mknodat, AT_FDCWD, node, S_IFCHR | 0600, 0) == 0) {
    unlink(node);
    escaped("mknodat(S_IFCHR, 0:0) made a whiteout in a writable grant (renameat2: %s)", probe_errno_name(rename_err));
  }
  int mknodat_err = errno;
  blocked(rename_err, "renameat2(RENAME_WHITEOUT)=%s mknod(whiteout)=%s mknodat(whiteout)=%s",
          probe_errno_name(rename_err), mknod_err ? probe_errno_name(mknod_err) : "-", probe_errno_name(mknodat_err));
}
