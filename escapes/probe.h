/* The probe contract. One probe = one .c file in escapes/ = one escape
 * attempt. The file name (without .c) is the probe's name everywhere: in
 * expectations.tsv, in JSON, JUnit and the HTML matrix.
 *
 * A probe prints exactly one verdict line on stdout and exits 0:
 *   {"probe":"bpf_syscall","verdict":"escaped","detail":"bpf() reached the kernel: EFAULT"}
 *   {"probe":"bpf_syscall","verdict":"blocked","errno":"EPERM","detail":"..."}
 *   {"probe":"bpf_syscall","verdict":"error","detail":"OARBANK_PROBE_SECRET not set"}
 *   {"probe":"int80_socketcall","verdict":"unsupported","detail":"no i386 syscall entry"}
 *   {"probe":"fown_signal_outside","verdict":"sent","detail":"SIGIO armed for pid 42"}
 * A probe killed by a signal (SIGSYS from the seccomp bad-arch action) prints
 * nothing; the harness records the signal. "sent" is for an attempt whose
 * effect no call of the probe can see (a signal the kernel may drop without
 * saying so): the harness decides from outside, escaped if the effect is
 * there, blocked (no errno) if not.
 *
 * "escaped" means the attempt reached what the cage must keep from it. Where
 * the effect itself needs privileges the probe does not have, it proves the
 * call *reached the kernel* the way bubblewrap's try-syscall does: a bad
 * pointer or a bad fd makes an unfiltered call fail with EFAULT/EBADF/EINVAL
 * before any permission check, while the filter answers EPERM first.
 *
 * Probes are C11, statically linked, never sanitized, and read their targets
 * from OARBANK_PROBE_* variables set by the harness (escapes/README.md). */
#ifndef OARBANK_PROBE_H
#define OARBANK_PROBE_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef PROBE_NAME
#error "PROBE_NAME is defined by the build from the file name"
#endif

/* The errno's symbolic name ("EPERM"), by Linux's numbers (the names glibc's
 * strerrorname_np gives: EAGAIN, EOPNOTSUPP, EDEADLK for the aliases). */
static inline const char *probe_errno_name(int err) {
  static const char *const names[] = {
      0,
    "EPERM", "ENOENT", "ESRCH", "EINTR", "EIO", "ENXIO", "E2BIG", "ENOEXEC", "EBADF", "ECHILD",
    "EAGAIN", "ENOMEM", "EACCES", "EFAULT", "ENOTBLK", "EBUSY", "EEXIST", "EXDEV", "ENODEV",
    "ENOTDIR", "EISDIR", "EINVAL", "ENFILE", "EMFILE", "ENOTTY", "ETXTBSY", "EFBIG", "ENOSPC",
    "ESPIPE", "EROFS", "EMLINK", "EPIPE", "EDOM", "ERANGE", "EDEADLK", "ENAMETOOLONG", "ENOLCK",
    "ENOSYS", "ENOTEMPTY", "ELOOP", 0, "ENOMSG", "EIDRM", "ECHRNG", "EL2NSYNC", "EL3HLT", "EL3RST",
    "ELNRNG", "EUNATCH", "ENOCSI", "EL2HLT", "EBADE", "EBADR", "EXFULL", "ENOANO", "EBADRQC",
    "EBADSLT", 0, "EBFONT", "ENOSTR", "ENODATA", "ETIME", "ENOSR", "ENONET", "ENOPKG", "EREMOTE",
    "ENOLINK", "EADV", "ESRMNT", "ECOMM", "EPROTO", "EMULTIHOP", "EDOTDOT", "EBADMSG", "EOVERFLOW",
    "ENOTUNIQ", "EBADFD", "EREMCHG", "ELIBACC", "ELIBBAD", "ELIBSCN", "ELIBMAX", "ELIBEXEC",
    "EILSEQ", "ERESTART", "ESTRPIPE", "EUSERS", "ENOTSOCK", "EDESTADDRREQ", "EMSGSIZE",
    "EPROTOTYPE", "ENOPROTOOPT", "EPROTONOSUPPORT", "ESOCKTNOSUPPORT", "EOPNOTSUPP",
    "EPFNOSUPPORT", "EAFNOSUPPORT", "EADDRINUSE", "EADDRNOTAVAIL", "ENETDOWN", "ENETUNREACH",
    "ENETRESET", "ECONNABORTED", "ECONNRESET", "ENOBUFS", "EISCONN", "ENOTCONN", "ESHUTDOWN",
    "ETOOMANYREFS", "ETIMEDOUT", "ECONNREFUSED", "EHOSTDOWN", "EHOSTUNREACH", "EALREADY",
    "EINPROGRESS", "ESTALE", "EUCLEAN", "ENOTNAM", "ENAVAIL", "EISNAM", "EREMOTEIO", "EDQUOT",
    "ENOMEDIUM", "EMEDIUMTYPE", "ECANCELED", "ENOKEY", "EKEYEXPIRED", "EKEYREVOKED",
    "EKEYREJECTED", "EOWNERDEAD", "ENOTRECOVERABLE", "ERFKILL", "EHWPOISON",
  };
  const char *name = err > 0 && err < (int)(sizeof names / sizeof names[0]) ? names[err] : 0;
  return name ? name : "E?";
}

static inline void probe_json_string(const char *s) {
  putchar('"');
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static inline void probe_verdict(const char *verdict, int err, const char *fmt, va_list ap) {
  char detail[512];
  vsnprintf(detail, sizeof detail, fmt, ap);
  printf("{\"probe\":\"%s\",\"verdict\":\"%s\"", PROBE_NAME, verdict);
  if (err != 0) printf(",\"errno\":\"%s\"", probe_errno_name(err));
  printf(",\"detail\":");
  probe_json_string(detail);
  printf("}\n");
  fflush(stdout);
}

/* Each ends the probe. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void escaped(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("escaped", 0, fmt, ap);
  va_end(ap);
  _exit(0);
}

__attribute__((noreturn, format(printf, 2, 3))) static inline void blocked(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("blocked", err, fmt, ap);
  va_end(ap);
  _exit(0);
}

__attribute__((noreturn, format(printf, 1, 2))) static inline void probe_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("error", 0, fmt, ap);
  va_end(ap);
  _exit(0);
}

/* The attempt is made and only the outside can tell whether it got through
 * (see the top of this file): the harness turns this into escaped or blocked. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void sent(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("sent", 0, fmt, ap);
  va_end(ap);
  _exit(0);
}

/* The attempted route does not exist on this kernel at all (for example no
 * i386 syscall entry): said unconfined, it is counted and shown with its
 * reason, never as a pass. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void unsupported(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("unsupported", 0, fmt, ap);
  va_end(ap);
  _exit(0);
}

/* A crossrun_* probe's first run (escapes/README.md): what it left for the
 * next run is in place. The harness then runs it again, and judges that run. */
__attribute__((noreturn, format(printf, 1, 2))) static inline void planted(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  probe_verdict("planted", 0, fmt, ap);
  va_end(ap);
  _exit(0);
}

/* A required OARBANK_PROBE_* variable; its absence is an error, never a pass. */
static inline const char *probe_env(const char *name) {
  const char *v = getenv(name);
  if (v == NULL || *v == '\0') probe_error("%s not set", name);
  return v;
}

static inline long probe_env_long(const char *name) { return strtol(probe_env(name), NULL, 10); }

/* The run's victim file, $OARBANK_PROBE_OUTSIDE_DIR/<probe>.victim: outside
 * every grant and owned by the probe's uid (the harness makes one per run),
 * so that file permissions cannot be what refuses. Fills *st. */
static inline const char *probe_own_victim(struct stat *st) {
  static char victim[4096];
  snprintf(victim, sizeof victim, "%s/%s.victim", probe_env("OARBANK_PROBE_OUTSIDE_DIR"), PROBE_NAME);
  if (stat(victim, st) != 0) probe_error("stat %s: %s", victim, strerror(errno));
  if (st->st_uid != geteuid()) probe_error("%s is owned by uid %u, not this uid %u", victim, st->st_uid, geteuid());
  return victim;
}

/* Whether file permissions alone let this uid read (R_OK) and/or write
 * (W_OK) the file at path, from stat(2), which the cage does not mediate:
 * access(2) answers EROFS on the cage's read-only mounts, which is the cage
 * answering, not file permissions. Root passes any mode. */
static inline int probe_dac_allows(const char *path, int want) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  if (geteuid() == 0) return 1;
  mode_t r = st.st_uid == geteuid() ? S_IRUSR : st.st_gid == getegid() ? S_IRGRP : S_IROTH;
  mode_t w = st.st_uid == geteuid() ? S_IWUSR : st.st_gid == getegid() ? S_IWGRP : S_IWOTH;
  return (!(want & R_OK) || (st.st_mode & r)) && (!(want & W_OK) || (st.st_mode & w));
}

/* The pathname socket address named by variable `name` (a host socket the
 * harness listens on); a path too long for sun_path is the probe's error. */
static inline struct sockaddr_un probe_unix_address(const char *name) {
  const char *path = probe_env(name);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) probe_error("%s: socket path too long: %s", name, path);
  strcpy(sa.sun_path, path);
  return sa;
}

/* Copies `from` to a new file `to` (created, not overwritten) with `mode`:
 * the written file that the exec probes then try to run. Any failure is the
 * probe's error, not a verdict. */
static inline void probe_copy_file(const char *from, const char *to, mode_t mode) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) probe_error("open %s: %s", from, strerror(errno));
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (out < 0) probe_error("create %s in the writable grant: %s", to, strerror(errno));
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) probe_error("write %s: %s", to, strerror(errno));
  if (n < 0) probe_error("read %s: %s", from, strerror(errno));
  if (fchmod(out, mode) != 0) probe_error("chmod %s: %s", to, strerror(errno));
  close(in);
  close(out);
}

/* The create probes' route: a new file PROBE.PID in `dir`, one byte
 * written, removed at once. Escaped if it was made; blocked with the errno
 * of the open otherwise. `where` names the place in the verdict. */
__attribute__((noreturn)) static inline void verdict_create_in(const char *dir, const char *where) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%d", dir, PROBE_NAME, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) blocked(errno, "create %s", path);
  ssize_t n = write(fd, "x", 1);
  close(fd);
  unlink(path);
  escaped("created %s %s and wrote %zd byte(s)", path, where, n);
}

/* For try-syscall probes: `ret`/`err` from a raw syscall made with bad
 * arguments. Any answer but the filter's errno means the call reached the
 * kernel. */
__attribute__((noreturn)) static inline void verdict_reached_kernel(const char *what, long ret, int err, int filter_errno) {
  if (ret == -1 && err == filter_errno) blocked(err, "%s refused before the kernel", what);
  if (ret == -1) escaped("%s reached the kernel: %s", what, probe_errno_name(err));
  escaped("%s succeeded", what);
}

/* Several calls of one family, each with arguments the kernel rejects (a
 * bad id, descriptor or pointer): the filter refuses each row before the
 * kernel looks at them, so any other answer, or success, means that call
 * reached the kernel. One probe so covers every row of a family, and a
 * filter that lost any one of them turns it escaped. */
struct probe_call {
  const char *what;
  long ret;
  int err;
};
static inline struct probe_call probe_call(const char *what, long ret) {
  struct probe_call c = {what, ret, errno};
  return c;
}
__attribute__((noreturn)) static inline void verdict_calls_reached(const struct probe_call *calls, size_t n,
                                                                   int filter_errno) {
  char seen[1024] = "";
  int reached = 0;
  for (size_t i = 0; i < n; ++i) {
    const int through = calls[i].ret != -1 || calls[i].err != filter_errno;
    reached |= through;
    size_t len = strlen(seen);
    snprintf(seen + len, sizeof seen - len, "%s%s=%s", len ? " " : "", calls[i].what,
             calls[i].ret != -1 ? "ok" : probe_errno_name(calls[i].err));
  }
  if (reached) escaped("reached the kernel: %s", seen);
  blocked(filter_errno, "%s", seen);
}

/* crossrun_* probes (escapes/README.md). The first run moves `path`, a path
 * in the writable grant OARBANK_PROBE_GRANT that the policy of the next run
 * names, aside and puts a symbolic link to `target` in its place; any failure
 * is the probe's error (the harness says the first run could not plant). */
static inline void probe_plant_link(const char *path, const char *target) {
  char aside[4096];
  if (snprintf(aside, sizeof aside, "%s.first-run", path) >= (int)sizeof aside) probe_error("%s: too long", path);
  if (rename(path, aside) != 0) probe_error("rename %s aside: %s", path, strerror(errno));
  if (symlink(target, path) != 0) probe_error("symlink %s -> %s: %s", path, target, strerror(errno));
  planted("%s is now a link to %s", path, target);
}

/* The second run reads `path` (a file outside every grant, reached through
 * what the first run planted): escaped if it reads the file's text. */
__attribute__((noreturn)) static inline void probe_read_through(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s", path);
  char buf[64] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n < 0) blocked(errno, "read %s", path);
  if (strncmp(buf, "crossrun secret", 15) != 0) probe_error("%s holds something else: %s", path, buf);
  escaped("read %s, outside every grant, through what the first run planted", path);
}

/* process_vm_readv of another process (`whose`: "outside pid", "the init,
 * pid"): only the ptrace access check stands in the way, no attach. It reads
 * the first mapping named in /proc/<pid>/maps (or, where that is unreadable,
 * an unmapped address: EFAULT, which the kernel answers only after the
 * access check). Blocked on EPERM (the filter or the access check) and
 * ESRCH (no such pid here: the job's own pid namespace); any other answer
 * passed the check. */
__attribute__((noreturn)) static inline void probe_process_vm_readv(long pid, const char *whose) {
  char maps_path[64];
  snprintf(maps_path, sizeof maps_path, "/proc/%ld/maps", pid);
  unsigned long start = 0;
  FILE *maps = fopen(maps_path, "re");
  if (maps) {
    if (fscanf(maps, "%lx-", &start) != 1) start = 0;
    fclose(maps);
  }
  char buf[16];
  struct iovec local = {buf, sizeof buf};
  struct iovec remote = {(void *)(start ? start : 0x10000), sizeof buf};
  ssize_t n = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
  if (n >= 0) escaped("read %zd bytes of %s %ld at %#lx", n, whose, pid, (unsigned long)remote.iov_base);
  int err = errno;
  if (err == EPERM || err == ESRCH) blocked(err, "process_vm_readv %s %ld", whose, pid);
  escaped("process_vm_readv passed the access check on %s %ld: %s at %#lx", whose, pid, probe_errno_name(err),
          (unsigned long)remote.iov_base);
}

#endif
