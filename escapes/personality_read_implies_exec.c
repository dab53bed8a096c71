/* personality(READ_IMPLIES_EXEC) makes every later readable mapping
 * executable (PROT_READ implies PROT_EXEC), a way around W^X and around
 * noexec for mmaps the program does not ask to execute. The seccomp filter
 * refuses personality with that bit set (EPERM). Unconfined it is set; the
 * probe exits at once, so nothing runs with it. */
#include <sys/personality.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long ret = syscall(SYS_personality, (unsigned long)(PER_LINUX | READ_IMPLIES_EXEC));
  if (ret >= 0) escaped("personality(READ_IMPLIES_EXEC) set (previous persona %#lx)", ret);
  blocked(errno, "personality(PER_LINUX | READ_IMPLIES_EXEC)");
}
