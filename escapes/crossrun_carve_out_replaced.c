/* What one run leaves for the next: a read-only carve-out's path replaced.
 * runner_agent and runner_exec_writable carve work/carved (a worktree's
 * .git) out of their writable grant. A first run without that carve-out
 * moves carved aside and puts a link to a decoy directory of its grant in
 * its place; the next run, if its launcher followed the link, would carve
 * the decoy out and leave what the policy protects, moved aside, writable.
 * The second run writes there: escaped if it can. Under a policy that
 * carves nothing out the directory is the job's to write (a positive
 * control). Nothing is written: a zero-length write after an O_APPEND open. */
#include "probe.h"

int main(void) {
  const char *grant = probe_env("OARBANK_PROBE_GRANT");
  char path[4096], decoy[4096];
  snprintf(path, sizeof path, "%s/carved", grant);
  if (probe_env_long("OARBANK_PROBE_RUN") == 1) {
    snprintf(decoy, sizeof decoy, "%s/decoy", grant);
    if (mkdir(decoy, 0777) != 0) probe_error("mkdir %s: %s", decoy, strerror(errno));
    probe_plant_link(path, decoy);
  }
  snprintf(path, sizeof path, "%s/carved.first-run/victim", grant);
  int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) blocked(errno, "open %s for writing", path);
  if (write(fd, "", 0) != 0) blocked(errno, "write %s", path);
  escaped("opened %s, the carve-out's own directory moved aside, for writing", path);
}
