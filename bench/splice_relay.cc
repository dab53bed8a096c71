// splice_relay: the reference point for bench/egress.sh's throughput. The
// least a relay on loopback can do: accept, read a CONNECT head up to its
// blank line, connect to the one upstream given on the command line, answer
// 200, then move bytes with splice(2) in blocking threads, one per direction.
// No allowlist, no resolver, no limits: a benchmark baseline, never a proxy.
//
//   splice_relay UPSTREAM_IPV4 PORT   prints {"port": N} once listening on 127.0.0.1
//
// What `oarbank-agent egress-proxy` costs beyond this is the proxy's own
// overhead; what this costs against a direct connection is the extra hop's.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr size_t kChunk = 1 << 20;

// Moves everything from `from` to `to`, then passes the half-close on.
void Pump(int from, int to) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  (void)fcntl(pipe_fds[1], F_SETPIPE_SZ, static_cast<int>(kChunk));
  for (;;) {
    ssize_t held = splice(from, nullptr, pipe_fds[1], nullptr, kChunk, SPLICE_F_MOVE);
    if (held <= 0) break;
    while (held > 0) {
      const ssize_t n =
          splice(pipe_fds[0], nullptr, to, nullptr, static_cast<size_t>(held), SPLICE_F_MOVE | SPLICE_F_MORE);
      if (n <= 0) goto done;
      held -= n;
    }
  }
done:
  shutdown(to, SHUT_WR);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

void Serve(int client, const sockaddr_in& upstream) {
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = read(client, buf, sizeof buf);
    if (n <= 0 || head.size() > 65536) return;
    head.append(buf, static_cast<size_t>(n));
  }
  const int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (up < 0 || connect(up, reinterpret_cast<const sockaddr*>(&upstream), sizeof upstream) != 0) return;
  const int one = 1;
  setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  constexpr char kOk[] = "HTTP/1.1 200 Connection established\r\n\r\n";
  if (write(client, kOk, sizeof kOk - 1) != sizeof kOk - 1) return;
  // Bytes the client sent after its head go first.
  const std::string rest = head.substr(head.find("\r\n\r\n") + 4);
  if (!rest.empty() && write(up, rest.data(), rest.size()) != static_cast<ssize_t>(rest.size())) return;
  std::thread back(Pump, up, client);
  Pump(client, up);
  back.join();
  close(up);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s UPSTREAM_IPV4 PORT\n", argv[0]);
    return 64;
  }
  sockaddr_in upstream{};
  upstream.sin_family = AF_INET;
  upstream.sin_port = htons(static_cast<uint16_t>(atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &upstream.sin_addr) != 1) {
    fprintf(stderr, "splice_relay: not an IPv4 address: %s\n", argv[1]);
    return 64;
  }
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_IGN);  // no zombies from the per-connection children
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof local;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      listen(listener, 256) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    perror("splice_relay: listen");
    return 1;
  }
  printf("{\"port\": %d}\n", ntohs(local.sin_port));
  fflush(stdout);
  for (;;) {
    const int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    const pid_t child = fork();
    if (child == 0) {
      close(listener);
      Serve(client, upstream);
      _exit(0);
    }
    close(client);
  }
}
