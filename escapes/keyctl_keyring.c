/* Kernel keyrings are shared beyond the sandbox (the user and session
 * keyrings of the uid: other processes' tokens, Kerberos tickets). The
 * seccomp filter refuses add_key, request_key and keyctl with EPERM.
 * add_key and request_key with a bad type pointer fail with EFAULT in the
 * kernel; keyctl(KEYCTL_GET_KEYRING_ID, session) answers an id or ENOKEY.
 * Escaped if any of the three reaches the kernel. */
#include <linux/keyctl.h>
#include <sys/syscall.h>

#include "probe.h"

int main(void) {
  long r_add = syscall(SYS_add_key, (const char *)1, "oarbank-probe", NULL, 0, KEY_SPEC_SESSION_KEYRING);
  int e_add = errno;
  long r_req = syscall(SYS_request_key, (const char *)1, "oarbank-probe", NULL, 0);
  int e_req = errno;
  long r_ctl = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
  int e_ctl = errno;
  char seen[200];
  snprintf(seen, sizeof seen, "add_key=%s request_key=%s keyctl(GET_KEYRING_ID)=%s",
           r_add >= 0 ? "ok" : probe_errno_name(e_add), r_req >= 0 ? "ok" : probe_errno_name(e_req),
           r_ctl >= 0 ? "ok" : probe_errno_name(e_ctl));
  if (r_add >= 0 || e_add != EPERM || r_req >= 0 || e_req != EPERM || r_ctl >= 0 || e_ctl != EPERM)
    escaped("keyrings reached: %s", seen);
  blocked(EPERM, "%s", seen);
}
