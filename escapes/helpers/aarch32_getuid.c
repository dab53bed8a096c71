/* The AArch32 half of the aarch32_syscall probe: a static 32-bit ARM
 * program, built only for arm64 batteries (arm-linux-gnueabihf-gcc). It
 * calls getuid32 through the AArch32 table and prints the probe's verdict
 * line; under a filter whose bad-arch action holds, its first syscall (in
 * the C library's start-up) kills it first. */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  long uid = syscall(SYS_getuid32);
  printf("{\"probe\":\"aarch32_syscall\",\"verdict\":\"escaped\",\"detail\":\"an AArch32 program ran its calls "
         "through the compat table: getuid32 answered uid %ld\"}\n",
         uid);
  return 0;
}
