/* Reading a process outside the cage with process_vm_readv (no ptrace
 * attach needed, only the ptrace access check). The seccomp filter refuses
 * it with EPERM; under run the job's pid namespace has no such pid (ESRCH).
 * Unconfined the call passes the access check (probe_process_vm_readv). */
#include "probe.h"

int main(void) { probe_process_vm_readv(probe_env_long("OARBANK_PROBE_OUTSIDE_PID"), "outside pid"); }
