/* What one run leaves for the next: the parent of a nested grant renamed
 * and replaced. runner_agent names agent/state inside its work grant (an
 * agent CLI's state in the worktree). A grant's own directory is a mount
 * point while the job runs (it cannot be renamed), but the directory above
 * it is not: the first run moves work/agent aside and puts a link to a
 * directory outside every grant (holding state/) in its place. The next
 * run, if its launcher followed the link, would be granted that state/
 * read-write. Under a policy that names no agent/state, the link is just a
 * link and Landlock refuses what it leads to. */
#include "probe.h"

int main(void) {
  const char *grant = probe_env("OARBANK_PROBE_GRANT");
  char path[4096];
  snprintf(path, sizeof path, "%s/agent", grant);
  if (probe_env_long("OARBANK_PROBE_RUN") == 1) probe_plant_link(path, probe_env("OARBANK_PROBE_ELSEWHERE"));
  snprintf(path, sizeof path, "%s/agent/state/secret", grant);
  probe_read_through(path);
}
