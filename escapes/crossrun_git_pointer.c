/* What one run leaves for the next: a .git pointer where there was none.
 * `cage --worktree W --writable` keeps W's history read-only: a .git
 * directory, or the git and common directories a .git file points to, are
 * granted read-only. A first run in a worktree with no .git writes one,
 * `gitdir: <a directory outside every grant>`; a next run that granted what
 * the pointer names would let the job read it. cage must refuse (exit 70):
 * the directory is no git directory that lists this worktree back. The
 * battery runs this probe under cage for runner_agent, and under the other
 * policies as it runs every probe, where a .git file is only a file and
 * Landlock refuses what it names. */
#include "probe.h"

int main(void) {
  const char *grant = probe_env("OARBANK_PROBE_GRANT");
  const char *elsewhere = probe_env("OARBANK_PROBE_ELSEWHERE");
  char path[4096];
  snprintf(path, sizeof path, "%s/.git", grant);
  if (probe_env_long("OARBANK_PROBE_RUN") == 1) {
    FILE *f = fopen(path, "wx");
    if (f == NULL) probe_error("create %s: %s", path, strerror(errno));
    fprintf(f, "gitdir: %s\n", elsewhere);
    if (fclose(f) != 0) probe_error("write %s: %s", path, strerror(errno));
    planted("%s points to %s", path, elsewhere);
  }
  snprintf(path, sizeof path, "%s/secret", elsewhere);
  probe_read_through(path);
}
