/* Listing a directory outside every grant (a home, ~/.ssh): the names are
 * the first step to a secret. Landlock's READ_DIR right is not granted
 * there: opening the directory answers EACCES. */
#include <dirent.h>

#include "probe.h"

int main(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", probe_env("OARBANK_PROBE_SECRET"));
  char *slash = strrchr(dir, '/');
  if (slash == NULL || slash == dir) probe_error("OARBANK_PROBE_SECRET has no directory: %s", dir);
  *slash = '\0';
  DIR *d = opendir(dir);
  if (d == NULL) blocked(errno, "opendir %s", dir);
  int names = 0;
  while (readdir(d) != NULL) ++names;
  escaped("listed %d names in %s, outside every grant", names, dir);
}
