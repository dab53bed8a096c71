/* A whiteout is a character device 0:0 (overlayfs reads it as "this name
 * was deleted"). renameat2(RENAME_WHITEOUT) and mknod(S_IFCHR, 0:0) make
 * one without CAP_MKNOD since Linux 5.8, so a job could make a device node
 * in a writable grant, and a whiteout left in a directory that a later
 * overlay mounts as a layer hides the name it covers. Which Landlock right
 * a whiteout needs is the kernel's Landlock erratum 4: without the fix,
 * renameat2's whiteout needs only MAKE_REG (the writable grants have it);
 * with it, mknod's needs MAKE_REG too where it needed MAKE_CHAR. The
 * seccomp filter refuses RENAME_WHITEOUT and mknod/mknodat of a character
 * device 0:0 itself (EPERM), so no kernel's answer decides it. Each
 * writable grant is tried. Unconfined as root each is made: escaped. */
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "probe.h"

#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

/* Tries each way to make a whiteout in `dir`; escapes on the first that
 * does, else notes the answers in `said`; the renameat2 errno. */
static int try_dir(const char* dir, char* said, size_t size) {
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
  if (made) escaped("renameat2(RENAME_WHITEOUT) left a whiteout (char 0:0) in %s", dir);
  if (rc == 0) probe_error("renameat2(RENAME_WHITEOUT) succeeded but left no whiteout at %s", from);
  int mknod_err = 0;
#ifdef SYS_mknod
  if (syscall(SYS_mknod, node, S_IFCHR | 0600, 0) == 0) {
    unlink(node);
    escaped("mknod(S_IFCHR, 0:0) made a whiteout in %s (renameat2: %s)", dir, probe_errno_name(rename_err));
  }
  mknod_err = errno;
#endif
  if (syscall(SYS_mknodat, AT_FDCWD, node, S_IFCHR | 0600, 0) == 0) {
    unlink(node);
    escaped("mknodat(S_IFCHR, 0:0) made a whiteout in %s (renameat2: %s)", dir, probe_errno_name(rename_err));
  }
  int mknodat_err = errno;
  size_t used = strlen(said);
  snprintf(said + used, size - used, "%s%s: renameat2(RENAME_WHITEOUT)=%s mknod(whiteout)=%s mknodat(whiteout)=%s",
           used ? "; " : "", dir, probe_errno_name(rename_err), mknod_err ? probe_errno_name(mknod_err) : "-",
           probe_errno_name(mknodat_err));
  return rename_err;
}

/* The run's writable subdirectory first, then the root of each writable
 * grant the policy has (a grant whose own rules gave MAKE_CHAR is seen). */
int main(void) {
  static char said[16384];
  int first = try_dir(probe_env("OARBANK_PROBE_WRITABLE"), said, sizeof said);
  char grants[4096];
  snprintf(grants, sizeof grants, "%s", probe_env("OARBANK_PROBE_WRITABLE_GRANTS"));
  for (char *save = NULL, *dir = strtok_r(grants, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save))
    try_dir(dir, said, sizeof said);
  blocked(first, "%s", said);
}
