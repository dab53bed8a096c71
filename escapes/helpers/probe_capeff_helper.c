/* Not a probe: the setuid_binary probe's target. The harness installs a copy
 * in the bundle as root, mode 4755; this prints that copy's effective
 * capabilities (the "CapEff:" line of /proc/self/status) and exits 0. */
#include <stdio.h>
#include <string.h>

int main(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) {
    perror("/proc/self/status");
    return 1;
  }
  char line[256];
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "CapEff:", 7) == 0) {
      fputs(line, stdout);
      found = 1;
    }
  }
  fclose(f);
  return found ? 0 : 1;
}
