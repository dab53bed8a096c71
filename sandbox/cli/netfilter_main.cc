// oarbank-netfilter: the supervisor's hand on an egress-any job's nftables
// ruleset, through libnftables (Debian's libnftables-dev). A program of its
// own because libnftables is shared-only in Debian and the agent is linked
// statically. The supervisor runs it once per job with the job's user
// namespace on fd 3 and its network namespace on fd 4 (job_network.h); it
// joins both (the supervisor's uid owns the job's user namespace, so it
// holds every capability there), closes them, and answers the supervisor's
// requests on stdin, one at a time, on stdout (both one stream socket):
//
//   apply N  (first, once; N bytes of ruleset follow the line) installs the
//            ruleset in one transaction and answers nothing
//   rules    answers the ruleset as the kernel holds it (no counters): what
//            the gate's read-back must find again
//   list     waits (at most 3 s) for the stack's IPv6 address on tap0, then
//            answers as rules: the gate's read-back, so the module starts
//            with IPv6 configured
//            (IPv4 is before the stack says it is ready; IPv6 follows its
//            router advertisement) and the wait overlaps the launcher's
//            own set-up instead of delaying its fork
//   dropped  answers the sum of the packets the ruleset's counters dropped
//
// A request is one line ("apply 1234", "rules", "list", "dropped"); an
// answer is "ok N" and a newline, then N bytes. The supervisor may send a
// request before the last one's answer has come back. Each request gets a
// libnftables context of its own, freed before the answer: between requests
// (while the job runs) the helper holds no netlink socket, only fds 0 to 2.
// A request it refuses or fails ends it with exit 1 and one line on stderr;
// the end of its input ends it with exit 0. One process for the job's
// requests, not one each: most of a run of it is the dynamic loader's.
#include <errno.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace {

constexpr int kUserNamespaceFd = 3;
constexpr int kNetNamespaceFd = 4;
constexpr size_t kMaxRuleset = 1 << 20;
constexpr size_t kMaxRequestLine = 64;

int Fail(const std::string& line) {
  fprintf(stderr, "oarbank-netfilter: %s\n", line.c_str());
  return 1;
}

// The ruleset, with or without its counters' values.
bool List(nft_ctx* ctx, bool stateless, std::string* out, std::string* err) {
  nft_ctx_output_set_flags(ctx, stateless ? NFT_CTX_OUTPUT_STATELESS : 0);
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  const int rc = nft_run_cmd_from_buffer(ctx, "list ruleset");
  *out = nft_ctx_get_output_buffer(ctx);
  *err = nft_ctx_get_error_buffer(ctx);
  nft_ctx_unbuffer_output(ctx);
  nft_ctx_unbuffer_error(ctx);
  return rc == 0;
}

unsigned long long DroppedPackets(const std::string& listing) {
  unsigned long long total = 0;
  for (size_t at = listing.find("counter packets "); at != std::string::npos;
       at = listing.find("counter packets ", at + 1)) {
    const size_t end = listing.find('\n', at);
    const std::string line = listing.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.find(" drop") == std::string::npos && line.find(" reject") == std::string::npos &&
        line.find(" goto refuse") == std::string::npos)
      continue;
    total += strtoull(line.c_str() + strlen("counter packets "), nullptr, 10);
  }
  return total;
}

bool HasGlobalIpv6(const char* interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET6 || strcmp(i->ifa_name, interface) != 0) continue;
    const auto* a = &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr;
    found = !IN6_IS_ADDR_LINKLOCAL(a);
  }
  freeifaddrs(list);
  return found;
}

// Has the kernel apply the interface's pending carrier change now. The
// stack attaches to tap0 (carrier on) and brings it up; IPv6 configures an
// interface only once its operational state is up, which the kernel's link
// watcher sets from the carrier, batching those changes across the whole
// system to one round a second. After another interface's change anywhere
// on the host (another job's, a container's) tap0 would wait up to that
// second. Asking for the link's state through ethtool (no privilege needed)
// makes a kernel whose ethtool link query syncs the link watcher (6.18
// does) settle this interface's pending change first; on one that does not
// the question is harmless and the wait is what it was.
void SettleLinkState(const char* interface) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  ethtool_value link{};
  link.cmd = ETHTOOL_GLINK;
  ifreq req{};
  snprintf(req.ifr_name, sizeof req.ifr_name, "%s", interface);
  req.ifr_data = reinterpret_cast<char*>(&link);
  (void)ioctl(fd, SIOCETHTOOL, &req);
  close(fd);
}

// Waits at most 3 s for the interface's global IPv6 address, which follows
// the stack's router advertisement once the interface is up (checked every
// 2 ms: it is usually there at the first look, or within a few ms).
bool AwaitGlobalIpv6(const char* interface) {
  for (int i = 0; i < 1500; ++i) {
    SettleLinkState(interface);
    if (HasGlobalIpv6(interface)) return true;
    usleep(2000);
  }
  return HasGlobalIpv6(interface);
}

// Requests come in on fd 0, read through this buffer: a request line, then
// an apply's ruleset.
class Input {
 public:
  enum class Got { kLine, kEnd, kCutShort, kTooLong };
  // The next line, without its newline, in `line`; kEnd at the end of the
  // input between requests.
  Got Line(std::string* line) {
    for (;;) {
      const size_t nl = buffered_.find('\n');
      if (nl != std::string::npos) {
        *line = buffered_.substr(0, nl);
        buffered_.erase(0, nl + 1);
        return Got::kLine;
      }
      if (buffered_.size() > kMaxRequestLine) return Got::kTooLong;
      if (!Fill()) return buffered_.empty() ? Got::kEnd : Got::kCutShort;
    }
  }
  // Exactly `n` bytes; false when the input ends first.
  bool Bytes(size_t n, std::string* out) {
    while (buffered_.size() < n)
      if (!Fill()) return false;
    *out = buffered_.substr(0, n);
    buffered_.erase(0, n);
    return true;
  }

 private:
  bool Fill() {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(0, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buffered_.append(buf, static_cast<size_t>(n));
      return true;
    }
  }
  std::string buffered_;
};

bool Answer(const std::string& text) {
  const std::string out = "ok " + std::to_string(text.size()) + "\n" + text;
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = write(1, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One request's work, in a context of its own; "" and `answer`, or why not.
std::string Serve(const std::string& request, Input& input, std::string* answer) {
  std::string ruleset;
  const bool apply = request.rfind("apply ", 0) == 0;
  if (apply) {
    const std::string size = request.substr(6);
    if (size.empty() || size.size() > 7 || size.find_first_not_of("0123456789") != std::string::npos)
      return "apply: not a size: " + size;
    const size_t n = std::stoul(size);
    if (n > kMaxRuleset) return "the ruleset is larger than 1 MiB";
    if (!input.Bytes(n, &ruleset)) return "read the ruleset: the input ended";
  }
  // Without an IPv6 address after 3 s the job runs with IPv4 alone.
  if (request == "list") (void)AwaitGlobalIpv6("tap0");
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return "nft_ctx_new failed";
  std::string why, out, err;
  if (apply) {
    nft_ctx_buffer_error(ctx);
    if (nft_run_cmd_from_buffer(ctx, ruleset.c_str()) != 0) {
      why = nft_ctx_get_error_buffer(ctx);
      while (!why.empty() && why.back() == '\n') why.pop_back();
      for (auto& c : why)
        if (c == '\n') c = ' ';
      why = "install the ruleset: " + why;
    }
    nft_ctx_unbuffer_error(ctx);
  }
  if (!apply && !List(ctx, request != "dropped", &out, &err)) why = "list the ruleset: " + err;
  nft_ctx_free(ctx);
  if (why.empty()) *answer = request == "dropped" ? std::to_string(DroppedPackets(out)) + "\n" : out;
  return why;
}

}  // namespace

int main(int argc, char**) {
  if (argc != 1)
    return Fail("usage: oarbank-netfilter (fds 3, 4: the job's user and net namespaces; requests on stdin)");
  if (setns(kUserNamespaceFd, CLONE_NEWUSER) != 0)
    return Fail(std::string("setns(the job's user namespace): ") + strerror(errno));
  if (setns(kNetNamespaceFd, CLONE_NEWNET) != 0)
    return Fail(std::string("setns(the job's network namespace): ") + strerror(errno));
  close(kUserNamespaceFd);
  close(kNetNamespaceFd);
  Input input;
  bool applied = false;
  std::string request;
  for (Input::Got got; (got = input.Line(&request)) != Input::Got::kEnd;) {
    if (got == Input::Got::kTooLong)
      return Fail("a request line longer than " + std::to_string(kMaxRequestLine) + " bytes");
    if (got == Input::Got::kCutShort) return Fail("the input ended inside a request line");
    const bool apply = request.rfind("apply ", 0) == 0;
    const bool in_order =
        apply ? !applied : applied && (request == "rules" || request == "list" || request == "dropped");
    if (!in_order)
      return Fail((applied ? "unexpected request: " : "apply comes first, not: ") + request.substr(0, kMaxRequestLine));
    std::string answer;
    if (std::string why = Serve(request, input, &answer); !why.empty()) return Fail(why);
    applied = true;
    if (!Answer(answer)) return Fail(std::string("write the answer: ") + strerror(errno));
  }
  return 0;
}
