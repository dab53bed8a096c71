/* Reading the job's init with process_vm_readv (OARBANK_PROBE_INIT_PID, as
 * in ptrace_job_init.c): its memory holds what it was started with. Only
 * the ptrace access check stands in the way, no attach. Refused by seccomp
 * (EPERM); under a debug policy by the kernel: the init is not dumpable
 * (EPERM). Unconfined the call passes the access check
 * (probe_process_vm_readv). */
#include "probe.h"

int main(void) { probe_process_vm_readv(probe_env_long("OARBANK_PROBE_INIT_PID"), "the init, pid"); }
