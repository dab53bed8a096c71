#include "sandbox/host/whiteout_trial.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "sandbox/host/landlock_abi.h"

namespace oarbank {
namespace {

constexpr unsigned kRenameWhiteout = 1u << 2;  // linux/fs.h

// The child's answer: 0 made, 1 refused by Landlock (EACCES), 2 anything
// else (the errno lost: the parent only needs which of the three).
[[noreturn]] void TryInChild(const std::string& dir, uint64_t allowed, bool by_mknod) {
  const uint64_t handled = kFsMakeChar | kFsMakeReg;
  const long ruleset = syscall(SYS_landlock_create_ruleset, &handled, sizeof handled, 0);
  const int dir_fd = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (ruleset < 0 || dir_fd < 0) _exit(2);
  struct landlock_path_beneath_attr rule = {allowed, dir_fd};
  if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0 ||
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
    _exit(2);
  const std::string from = dir + "/from", to = dir + "/to";
  const long rc = by_mknod ? syscall(SYS_mknodat, AT_FDCWD, to.c_str(), S_IFCHR | 0600, 0)
                           : syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), kRenameWhiteout);
  _exit(rc == 0 ? 0 : errno == EACCES ? 1 : 2);
}

// Runs one trial on a fresh "from" file; the child's answer, or 2.
int Trial(const std::string& dir, uint64_t allowed, bool by_mknod) {
  const std::string from = dir + "/from", to = dir + "/to";
  unlink(from.c_str());
  unlink(to.c_str());
  const int fd = open(from.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return 2;
  close(fd);
  const pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) TryInChild(dir, allowed, by_mknod);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  unlink(from.c_str());
  unlink(to.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

// "make_reg" when MAKE_REG alone lets the whiteout be made, "make_char"
// when MAKE_CHAR is needed too, "fails" otherwise.
std::string Needs(const std::string& dir, bool by_mknod) {
  const int make_reg = Trial(dir, kFsMakeReg, by_mknod);
  if (make_reg == 0) return "make_reg";
  return make_reg == 1 && Trial(dir, kFsMakeReg | kFsMakeChar, by_mknod) == 0 ? "make_char" : "fails";
}

}  // namespace

std::string ProbeWhiteoutRight(int landlock_kernel_abi) {
  if (landlock_kernel_abi <= 0) return "unknown: no Landlock";
  char dir[] = "/tmp/oarbank-whiteout-XXXXXX";
  if (mkdtemp(dir) == nullptr) return std::string("unknown: mkdtemp /tmp: ") + strerror(errno);
  const std::string rename = Needs(dir, false), mknod = Needs(dir, true);
  rmdir(dir);
  if (rename == "fails" && mknod == "fails") return "unknown: no whiteout could be made in /tmp";
  return "rename " + rename + ", mknod " + mknod;
}

}  // namespace oarbank
