/* What one run leaves for the next: a nested grant replaced by a link.
 * runner_agent names agent/state inside its work grant (an agent CLI's state
 * in the worktree). A first run that was not given that path (the
 * verification run, which has no state directory) moves work/agent/state
 * aside and puts a link to a directory outside every grant in its place; the
 * next run, given agent/state again, would be granted what the link leads
 * to, read-write, if the launcher followed it. It must refuse the policy
 * instead (exit 64): the link lies inside a grant, so the job could have
 * planted it. Under a policy that names no agent/state, the link is just a
 * link and Landlock refuses what it leads to. */
#include "probe.h"

int main(void) {
  const char *grant = probe_env("OARBANK_PROBE_GRANT");
  char path[4096], target[4096];
  snprintf(path, sizeof path, "%s/agent/state", grant);
  snprintf(target, sizeof target, "%s/state", probe_env("OARBANK_PROBE_ELSEWHERE"));
  if (probe_env_long("OARBANK_PROBE_RUN") == 1) probe_plant_link(path, target);
  snprintf(path, sizeof path, "%s/agent/state/secret", grant);
  probe_read_through(path);
}
