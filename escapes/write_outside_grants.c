/* Writing outside every grant: creating a file in a directory that no grant
 * covers (a home, a dotfile directory, another project). Landlock refuses
 * the creation (no MAKE_REG right there) with EACCES. */
#include "probe.h"

int main(void) { verdict_create_in(probe_env("OARBANK_PROBE_OUTSIDE_DIR"), "outside every grant"); }
