/* Writing into the runtime: the interpreter or libraries the policy lends
 * the module are read+execute only, like the bundle, so a module cannot
 * change what a later run executes. The read-only mounts answer EROFS; the
 * runtime's Landlock rules grant no write or make right behind them
 * (EACCES). The runtime belongs to root (mode 0755): as uid 65534 the file
 * permissions refuse too, so the root cells are the ones that prove it. */
#include "probe.h"

int main(void) { verdict_create_in(probe_env("OARBANK_PROBE_RUNTIME"), "in the runtime"); }
