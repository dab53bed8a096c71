// oarbank-netfilter: the supervisor's hand on an egress-any job's nftables
// ruleset: installed through libnftables (Debian's libnftables-dev), its
// generation and drop counter read through libmnl (one netlink request
// each, which libnftables has no call for). A program of its own because
// libnftables is shared-only in Debian and the agent is linked statically.
// The supervisor starts it once per job, before the job's namespaces exist
// (its dynamic loading overlaps the job's clone), and it answers the
// supervisor's requests on stdin, one at a time, on stdout (both one
// stream socket):
//
//   namespaces  (first, once) carries two descriptors, the job's user and
//               network namespaces, which it joins (the supervisor's uid
//               owns the job's user namespace, so it holds every
//               capability there) and closes; it makes the stack's tap0
//               there (MakeTap) and answers, empty, once tap0 is made
//   apply N     (then, once; N bytes of ruleset follow the line) installs
//               the ruleset in one transaction and answers the namespace's
//               nftables generation after it: the kernel counts every
//               committed change to the namespace's ruleset, so the
//               install is refused unless the count went up by exactly
//               one across it (nothing else was committed with it)
//   generation  waits (at most 3 s) for the stack's IPv6 address on tap0,
//               then answers the generation: the gate's read-back, which
//               must find the install's again (nothing changed since), so
//               the module starts with IPv6 configured (IPv4 is before
//               the stack says it is ready; IPv6 follows its router
//               advertisement) and the wait overlaps the launcher's own
//               set-up instead of delaying its fork
//   dropped     answers the packets the ruleset's named counter `dropped`
//               (table inet oarbank) counted
//
// A request is one line ("apply 1234", "generation", "dropped"); an answer
// is "ok N" and a newline, then N bytes (a generation is its decimal number
// and a newline). The supervisor may send a request before the last one's
// answer has come back. Each request gets a libnftables context or netlink
// socket of its own, freed before the answer: between requests (while the
// job runs) the helper holds no netlink socket, only fds 0 to 2. A request
// it refuses or fails ends it with exit 1 and one line on stderr; the end
// of its input ends it with exit 0 (before the namespaces too: a job
// refused before its namespaces were made). One process for the job's
// requests, not one each: most of a run of it is the dynamic loader's.
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/if_tun.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

// After netinet/in.h, whose definitions linux/in.h (which this includes)
// then leaves to it.
#include <linux/netfilter.h>

#include <string>

namespace {

constexpr char kNamespacesLine[] = "namespaces\n";
constexpr size_t kMaxRuleset = 1 << 20;
constexpr size_t kMaxRequestLine = 64;

int Fail(const std::string& line) {
  fprintf(stderr, "oarbank-netfilter: %s\n", line.c_str());
  return 1;
}

// One nf_tables request on a netlink socket of its own: `type` for
// `family`, with the attributes `put` adds; each attribute of the answer
// goes to `on_attr`. libmnl builds the request and walks the answer.
bool AskKernel(uint16_t type, uint8_t family, void (*put)(nlmsghdr*), mnl_attr_cb_t on_attr, void* data,
               std::string* why) {
  mnl_socket* nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
  if (nl == nullptr) {
    *why = std::string("netlink socket: ") + strerror(errno);
    return false;
  }
  char buf[MNL_SOCKET_BUFFER_SIZE];
  nlmsghdr* req = mnl_nlmsg_put_header(buf);
  req->nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | type);
  req->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req->nlmsg_seq = 1;
  auto* nfg = static_cast<nfgenmsg*>(mnl_nlmsg_put_extra_header(req, sizeof(nfgenmsg)));
  nfg->nfgen_family = family;
  nfg->version = NFNETLINK_V0;
  if (put != nullptr) put(req);
  struct Walk {
    mnl_attr_cb_t on_attr;
    void* data;
  } walk{on_attr, data};
  auto on_message = [](const nlmsghdr* nlh, void* w) {
    auto* walk = static_cast<Walk*>(w);
    return mnl_attr_parse(nlh, sizeof(nfgenmsg), walk->on_attr, walk->data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
  };
  int rc = mnl_socket_sendto(nl, req, req->nlmsg_len) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
  // The answer, then the acknowledgement (MNL_CB_STOP); an error answer
  // sets errno.
  while (rc == MNL_CB_OK) {
    const ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
    rc = n <= 0 ? MNL_CB_ERROR
                : mnl_cb_run(buf, static_cast<size_t>(n), 1, mnl_socket_get_portid(nl), on_message, &walk);
  }
  if (rc == MNL_CB_ERROR) *why = strerror(errno);
  mnl_socket_close(nl);
  return rc != MNL_CB_ERROR;
}

// The namespace's nftables generation (NFT_MSG_GETGEN): a count the kernel
// moves on with every transaction committed to the namespace's ruleset,
// read without listing the ruleset (a listing costs libnftables about 0.5
// ms per job here).
bool Generation(uint32_t* gen, std::string* why) {
  std::pair<uint32_t, bool> got{0, false};
  auto on_attr = [](const nlattr* attr, void* data) {
    auto* got = static_cast<std::pair<uint32_t, bool>*>(data);
    if (mnl_attr_get_type(attr) == NFTA_GEN_ID && mnl_attr_validate(attr, MNL_TYPE_U32) == 0)
      *got = {ntohl(mnl_attr_get_u32(attr)), true};
    return MNL_CB_OK;
  };
  if (!AskKernel(NFT_MSG_GETGEN, AF_UNSPEC, nullptr, on_attr, &got, why)) {
    *why = "read the nftables generation: " + *why;
    return false;
  }
  if (!got.second) *why = "read the nftables generation: the answer holds none";
  *gen = got.first;
  return got.second;
}

// The packets the ruleset's named counter `dropped` (table inet oarbank,
// job_ruleset.cc: every refusal and every inbound drop counts there) has
// counted (NFT_MSG_GETOBJ), read without listing the ruleset.
bool DroppedPackets(uint64_t* packets, std::string* why) {
  auto put = [](nlmsghdr* req) {
    mnl_attr_put_strz(req, NFTA_OBJ_TABLE, "oarbank");
    mnl_attr_put_strz(req, NFTA_OBJ_NAME, "dropped");
    mnl_attr_put_u32(req, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
  };
  std::pair<uint64_t, bool> got{0, false};
  auto on_attr = [](const nlattr* attr, void* data) {
    if (mnl_attr_get_type(attr) != NFTA_OBJ_DATA || mnl_attr_validate(attr, MNL_TYPE_NESTED) != 0) return MNL_CB_OK;
    auto on_counter = [](const nlattr* attr, void* data) {
      if (mnl_attr_get_type(attr) == NFTA_COUNTER_PACKETS && mnl_attr_validate(attr, MNL_TYPE_U64) == 0)
        *static_cast<std::pair<uint64_t, bool>*>(data) = {be64toh(mnl_attr_get_u64(attr)), true};
      return MNL_CB_OK;
    };
    return mnl_attr_parse_nested(attr, on_counter, data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
  };
  if (!AskKernel(NFT_MSG_GETOBJ, NFPROTO_INET, put, on_attr, &got, why)) {
    *why = "read the counter dropped: " + *why;
    return false;
  }
  if (!got.second) *why = "read the counter dropped: the answer holds no packet count";
  *packets = got.first;
  return got.second;
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

// Whether the interface exists and is up (the stack brings tap0 up once it
// has attached to it and configured it).
bool IsUp(const char* interface) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // cannot tell: wait as for one that is
  ifreq req{};
  snprintf(req.ifr_name, sizeof req.ifr_name, "%s", interface);
  const bool up = ioctl(fd, SIOCGIFFLAGS, &req) == 0 && (req.ifr_flags & IFF_UP) != 0;
  close(fd);
  return up;
}

// Waits at most 3 s for the interface's global IPv6 address, which follows
// the stack's router advertisement once the interface is up (checked every
// 2 ms: it is usually there at the first look, or within a few ms).
bool AwaitGlobalIpv6(const char* interface) {
  if (!IsUp(interface)) return false;  // the stack never brought it up: nothing to wait for
  for (int i = 0; i < 1500; ++i) {
    SettleLinkState(interface);
    if (HasGlobalIpv6(interface)) return true;
    usleep(2000);
  }
  return HasGlobalIpv6(interface);
}

enum class Joined { kYes, kNo, kEnded };

// The first request, "namespaces", read alone (before any buffered read)
// with the two descriptors it carries, the job's user and network
// namespaces, which the helper joins and closes. kEnded: the input ended
// first (the job ended before its namespaces were made).
Joined JoinNamespaces(std::string* why) {
  char line[sizeof kNamespacesLine - 1];
  size_t got = 0;
  int fds[2] = {-1, -1};
  size_t nfds = 0;
  while (got < sizeof line) {
    iovec iov{line + got, sizeof line - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = std::string("read the namespaces: ") + strerror(errno);
      return Joined::kNo;
    }
    if (n == 0) {
      if (got == 0 && nfds == 0) return Joined::kEnded;
      *why = "the input ended inside the namespaces request";
      return Joined::kNo;
    }
    // Descriptors past the buffer's two are closed by the kernel, which says so.
    if (msg.msg_flags & MSG_CTRUNC) nfds = 3;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (nfds < 2)
          fds[nfds] = fd;
        else
          close(fd);
        ++nfds;
      }
    }
    got += static_cast<size_t>(n);
  }
  const std::string first(line, sizeof line);
  if (first != kNamespacesLine) {
    *why = "the namespaces come first, not: " + first.substr(0, first.find('\n'));
    return Joined::kNo;
  }
  if (nfds != 2) {
    *why = nfds > 2 ? "the namespaces request carries more than 2 descriptors"
                    : "the namespaces request carries " + std::to_string(nfds) + " descriptors, not 2";
    return Joined::kNo;
  }
  if (setns(fds[0], CLONE_NEWUSER) != 0)
    *why = std::string("join the job's user namespace (setns): ") + strerror(errno);
  else if (setns(fds[1], CLONE_NEWNET) != 0)
    *why = std::string("join the job's network namespace (setns): ") + strerror(errno);
  close(fds[0]);
  close(fds[1]);
  return why->empty() ? Joined::kYes : Joined::kNo;
}

// tap0, persistent, for the stack (which attaches to a tap device of this
// name and flags), made once the namespaces are joined and before the stack
// starts; "" or why not. Persistent: a tap that ends with its last
// descriptor is unregistered in that close, behind an RCU barrier (about 15
// ms), which would fall in the stack's exit and so in every job's end; a
// persistent one goes with the namespace, asynchronously.
std::string MakeTap() {
  // Duplicate address detection would hold the stack's IPv6 address back
  // for a second; the namespace holds nobody else. Best effort: IPv4 works
  // without. Set before tap0 exists, which copies `default`.
  for (const char* path : {"/proc/sys/net/ipv6/conf/default/accept_dad", "/proc/sys/net/ipv6/conf/all/accept_dad"}) {
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)!write(fd, "0\n", 2);
    close(fd);
  }
  // The device the supervisor checks before the job (TunDeviceGap, job_network.h).
  const int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (tun < 0) return std::string("the stack's tap device: open /dev/net/tun: ") + strerror(errno);
  ifreq req{};
  memcpy(req.ifr_name, "tap0", 5);
  req.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::string why;
  if (ioctl(tun, TUNSETIFF, &req) != 0)
    why = std::string("the stack's tap device: create tap0 (TUNSETIFF): ") + strerror(errno);
  else if (ioctl(tun, TUNSETPERSIST, 1) != 0)
    why = std::string("the stack's tap device: make tap0 persistent (TUNSETPERSIST): ") + strerror(errno);
  close(tun);
  return why;
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

// apply: the ruleset installed in one transaction, and the generation it
// made; "" and `answer`, or why not.
std::string Apply(const std::string& ruleset, std::string* answer) {
  uint32_t before = 0, after = 0;
  std::string why;
  if (!Generation(&before, &why)) return why;
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (ctx == nullptr) return "nft_ctx_new failed";
  nft_ctx_buffer_error(ctx);
  if (nft_run_cmd_from_buffer(ctx, ruleset.c_str()) != 0) {
    why = nft_ctx_get_error_buffer(ctx);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    for (auto& c : why)
      if (c == '\n') c = ' ';
    why = "install the ruleset: " + why;
  }
  nft_ctx_unbuffer_error(ctx);
  nft_ctx_free(ctx);
  if (!why.empty() || !Generation(&after, &why)) return why;
  // The count skips 0 when it wraps.
  const uint32_t next = before + 1 == 0 ? 1 : before + 1;
  if (after != next)
    return "install the ruleset: the nftables generation went from " + std::to_string(before) + " to " +
           std::to_string(after) + " across it: another change was committed with it";
  *answer = std::to_string(after) + "\n";
  return "";
}

// generation: once the stack's IPv6 address is there (or after 3 s, when
// the job runs with IPv4 alone), the generation.
std::string AnswerGeneration(std::string* answer) {
  (void)AwaitGlobalIpv6("tap0");
  uint32_t gen = 0;
  std::string why;
  if (!Generation(&gen, &why)) return why;
  *answer = std::to_string(gen) + "\n";
  return "";
}

// dropped: the packets the ruleset's counter `dropped` counted.
std::string AnswerDropped(std::string* answer) {
  uint64_t packets = 0;
  std::string why;
  if (!DroppedPackets(&packets, &why)) return why;
  *answer = std::to_string(packets) + "\n";
  return "";
}

// One request's work; "" and `answer`, or why not.
std::string Serve(const std::string& request, Input& input, std::string* answer) {
  if (request == "generation") return AnswerGeneration(answer);
  if (request == "dropped") return AnswerDropped(answer);
  const std::string size = request.substr(strlen("apply "));
  if (size.empty() || size.size() > 7 || size.find_first_not_of("0123456789") != std::string::npos)
    return "apply: not a size: " + size;
  const size_t n = std::stoul(size);
  if (n > kMaxRuleset) return "the ruleset is larger than 1 MiB";
  std::string ruleset;
  if (!input.Bytes(n, &ruleset)) return "read the ruleset: the input ended";
  return Apply(ruleset, answer);
}

}  // namespace

int main(int argc, char**) {
  if (argc != 1) return Fail("usage: oarbank-netfilter (requests on stdin, the first one carrying the namespaces)");
  std::string why;
  switch (JoinNamespaces(&why)) {
    case Joined::kYes: break;
    case Joined::kEnded: return 0;
    case Joined::kNo: return Fail(why);
  }
  if (std::string tap = MakeTap(); !tap.empty()) return Fail(tap);
  if (!Answer("")) return Fail(std::string("write the answer: ") + strerror(errno));
  Input input;
  bool applied = false;
  std::string request;
  for (Input::Got got; (got = input.Line(&request)) != Input::Got::kEnd;) {
    if (got == Input::Got::kTooLong)
      return Fail("a request line longer than " + std::to_string(kMaxRequestLine) + " bytes");
    if (got == Input::Got::kCutShort) return Fail("the input ended inside a request line");
    const bool apply = request.rfind("apply ", 0) == 0;
    const bool in_order = apply ? !applied : applied && (request == "generation" || request == "dropped");
    if (!in_order)
      return Fail((applied ? "unexpected request: " : "apply comes first, not: ") + request.substr(0, kMaxRequestLine));
    std::string answer;
    if (std::string why = Serve(request, input, &answer); !why.empty()) return Fail(why);
    applied = true;
    if (!Answer(answer)) return Fail(std::string("write the answer: ") + strerror(errno));
  }
  return 0;
}
