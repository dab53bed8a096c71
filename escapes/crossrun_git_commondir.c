/* What one run leaves for the next: a .git directory whose commondir names
 * a directory outside every grant. Git writes commondir only in a linked
 * worktree's git directory (.git/worktrees/<name>), never in a worktree's
 * own .git; a cage that took it at its word would grant what it names
 * read-only as the worktree's history. The first run, in a worktree with no
 * .git, makes one that looks like a repository (HEAD, objects/, refs/) with
 * such a commondir; cage must refuse the next run (exit 70). Under the
 * other policies .git is only a directory and Landlock refuses what its
 * commondir names. */
#include "probe.h"

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wx");
  if (f == NULL) probe_error("create %s: %s", path, strerror(errno));
  fputs(text, f);
  if (fclose(f) != 0) probe_error("write %s: %s", path, strerror(errno));
}

int main(void) {
  const char *grant = probe_env("OARBANK_PROBE_GRANT");
  const char *elsewhere = probe_env("OARBANK_PROBE_ELSEWHERE");
  char path[4096], text[4200];
  if (probe_env_long("OARBANK_PROBE_RUN") == 1) {
    const char *const dirs[] = {".git", ".git/objects", ".git/refs"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; ++i) {
      snprintf(path, sizeof path, "%s/%s", grant, dirs[i]);
      if (mkdir(path, 0755) != 0) probe_error("mkdir %s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/.git/HEAD", grant);
    write_file(path, "ref: refs/heads/main\n");
    snprintf(path, sizeof path, "%s/.git/commondir", grant);
    snprintf(text, sizeof text, "%s\n", elsewhere);
    write_file(path, text);
    planted("%s names %s", path, elsewhere);
  }
  snprintf(path, sizeof path, "%s/secret", elsewhere);
  probe_read_through(path);
}
