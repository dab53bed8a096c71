/* Writing into the bundle: the module's own code is read+execute only, so a
 * module cannot plant code that a later (possibly more privileged) run
 * executes. The read-only mounts refuse it (EROFS); Landlock grants the
 * bundle no write or make right behind them (EACCES). */
#include "probe.h"

int main(void) { verdict_create_in(probe_env("OARBANK_PROBE_BUNDLE"), "in the bundle"); }
