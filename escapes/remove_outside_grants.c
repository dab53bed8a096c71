/* Removing a file or a directory outside the writable grants, both the
 * probe's uid's own in a directory it may write (mode 0777): only the cage
 * may stop it. Everything outside the writable grants is a read-only mount
 * (EROFS), and Landlock gives no REMOVE_FILE or REMOVE_DIR there (EACCES)
 * behind it. */
#include "probe.h"

int main(void) {
  const char *outside = probe_env("OARBANK_PROBE_OUTSIDE_DIR");
  char file[4200], dir[4200];
  snprintf(file, sizeof file, "%s/%s.victim", outside, PROBE_NAME);
  snprintf(dir, sizeof dir, "%s/%s.victim.d", outside, PROBE_NAME);
  const struct probe_call calls[] = {probe_call("unlink", unlink(file)), probe_call("rmdir", rmdir(dir))};
  if (calls[0].ret == 0 || calls[1].ret == 0)
    escaped("outside the writable grants: unlink %s, rmdir %s", calls[0].ret == 0 ? "removed" : probe_errno_name(calls[0].err),
            calls[1].ret == 0 ? "removed" : probe_errno_name(calls[1].err));
  blocked(calls[0].err, "unlink=%s rmdir=%s", probe_errno_name(calls[0].err), probe_errno_name(calls[1].err));
}
