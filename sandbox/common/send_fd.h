// Hands file descriptors to the process at the other end of a Unix socket
// (SCM_RIGHTS), with the bytes that say what they are. Allocation-free: the
// job's processes call it after the fork.
#pragma once

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

namespace oarbank {

inline constexpr size_t kMaxSentFds = 4;

// Sends `len` bytes of `data` with `nfds` descriptors (1 to kMaxSentFds)
// in one sendmsg: 0, or the errno of the send (EIO when it was cut short,
// EINVAL for a count out of range).
inline int SendFds(int socket, const void* data, size_t len, const int* fds, size_t nfds) {
  if (nfds == 0 || nfds > kMaxSentFds) return EINVAL;
  iovec iov{const_cast<void*>(data), len};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxSentFds * sizeof(int))];
  memset(control, 0, sizeof control);
  msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
  memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  ssize_t n;
  do n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(len) ? 0 : (n < 0 ? errno : EIO);
}

// One descriptor with a one-byte tag saying what it is.
inline int SendFd(int socket, char tag, int fd) { return SendFds(socket, &tag, 1, &fd, 1); }

}  // namespace oarbank
