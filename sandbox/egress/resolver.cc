#include "sandbox/egress/resolver.h"

#include "sandbox/common/read_file.h"

#include <ares.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>
#include <unordered_map>

namespace oarbank::egress {
namespace {

std::string AresReason(int status) {
  switch (status) {
    case ARES_ENOTFOUND: return "cannot resolve: no such name";
    case ARES_ENODATA: return "cannot resolve: no IPv4 or IPv6 address";
    case ARES_ETIMEOUT: return "cannot resolve: no answer from the name servers";
    case ARES_ECONNREFUSED: return "cannot resolve: the name servers refused the connection";
    case ARES_ESERVFAIL: return "cannot resolve: the name server failed (SERVFAIL)";
    case ARES_EREFUSED: return "cannot resolve: the name server refused the query";
    case ARES_EDESTRUCTION: return "cannot resolve: the resolver stopped";
    default: return std::string("cannot resolve: ") + ares_strerror(status);
  }
}

// c-ares on one thread of its own. Requests arrive through a queue and an
// eventfd; the thread owns the channel (c-ares channels are not
// thread-safe), polls the sockets c-ares reports through its socket-state
// callback, and answers every waiter of a name when that name's one query
// ends.
class AresResolver : public Resolver {
 public:
  explicit AresResolver(const SystemResolverOptions& o) : options_(o) {
    static std::once_flag once;
    std::call_once(once, [] { ares_library_init(ARES_LIB_INIT_ALL); });
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    conf_ = Stamp();
    init_status_ = NewChannel(&channel_);
    if (init_status_ != ARES_SUCCESS) channel_ = nullptr;
    if (channel_ == nullptr || wake_ < 0) return;  // every lookup answers why (Resolve)
    // The thread starts with every signal blocked: it must never take one
    // meant for the process (SIGPIPE, the agent's SIGTERM/SIGCHLD).
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    thread_ = std::thread([this] { Loop(); });
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    started_ = true;
  }

  // A channel with exactly-the-name lookups and the servers of the current
  // /etc/resolv.conf.
  int NewChannel(ares_channel* channel) {
    const SystemResolverOptions& o = options_;
    ares_options opts{};
    int mask = 0;
    opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
    mask |= ARES_OPT_FLAGS;
    opts.ndots = 0;  // the name as given first, and (no domains) only
    mask |= ARES_OPT_NDOTS;
    opts.domains = nullptr;
    opts.ndomains = 0;  // no search list, whatever resolv.conf or LOCALDOMAIN say
    mask |= ARES_OPT_DOMAINS;
    static char lookups[] = "fb";  // /etc/hosts, then DNS; never anything else
    opts.lookups = lookups;
    mask |= ARES_OPT_LOOKUPS;
    opts.timeout = o.timeout_ms;
    mask |= ARES_OPT_TIMEOUTMS;
    opts.tries = o.tries;
    mask |= ARES_OPT_TRIES;
    opts.sock_state_cb = &AresResolver::SockState;
    opts.sock_state_cb_data = this;
    mask |= ARES_OPT_SOCK_STATE_CB;
    return ares_init_options(channel, &opts, mask);
  }

  ~AresResolver() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) {
      Wake();
      thread_.join();
    }
    if (channel_ != nullptr) ares_destroy(channel_);
    if (wake_ >= 0) close(wake_);
  }

  void Resolve(const std::string& host, Callback done) override {
    if (!started_)  // set once by the constructor; channel_ is the loop thread's
      return done(Error{"resolve", std::string("cannot resolve: the resolver did not start: ") +
                                       (init_status_ != ARES_SUCCESS ? ares_strerror(init_status_) : "eventfd")});
    {
      std::lock_guard lock(mu_);
      if (stopping_) return done(Error{"resolve", AresReason(ARES_EDESTRUCTION)});
      queue_.emplace_back(host, std::move(done));
    }
    Wake();
  }

 private:
  struct Query {
    AresResolver* self;
    std::string name;
  };

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof one);
  }

  static void SockState(void* data, ares_socket_t fd, int readable, int writable) {
    auto* self = static_cast<AresResolver*>(data);
    if (!readable && !writable)
      self->sockets_.erase(fd);
    else
      self->sockets_[fd] = static_cast<short>((readable ? POLLIN : 0) | (writable ? POLLOUT : 0));
  }

  static void OnAnswer(void* arg, int status, int /*timeouts*/, ares_addrinfo* result) {
    std::unique_ptr<Query> q(static_cast<Query*>(arg));
    Answer answer = Error{"resolve", AresReason(status)};
    if (status == ARES_SUCCESS && result != nullptr) {
      std::vector<IpAddress> out;
      for (auto* n = result->nodes; n != nullptr; n = n->ai_next) {
        IpAddress ip;
        if (n->ai_family == AF_INET && n->ai_addr != nullptr) {
          ip.v4 = true;
          memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in*>(n->ai_addr)->sin_addr, 4);
        } else if (n->ai_family == AF_INET6 && n->ai_addr != nullptr) {
          ip.v4 = false;
          memcpy(ip.bytes.data(), &reinterpret_cast<sockaddr_in6*>(n->ai_addr)->sin6_addr, 16);
        } else {
          continue;
        }
        if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
      }
      answer = out.empty() ? Answer(Error{"resolve", AresReason(ARES_ENODATA)}) : Answer(std::move(out));
    }
    if (result != nullptr) ares_freeaddrinfo(result);
    auto it = q->self->waiting_.find(q->name);
    if (it == q->self->waiting_.end()) return;
    auto waiters = std::move(it->second);
    q->self->waiting_.erase(it);
    for (auto& w : waiters) w(answer);
  }

  void Start(const std::string& host, Callback done) {
    auto [it, fresh] = waiting_.try_emplace(host);
    it->second.push_back(std::move(done));
    if (!fresh) return;  // one query per name in flight: this one shares it
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = ARES_AI_NOSORT;  // sorting would connect a UDP socket per address
    ares_getaddrinfo(channel_, host.c_str(), nullptr, &hints, &AresResolver::OnAnswer, new Query{this, host});
  }

  // What identifies a version of /etc/resolv.conf.
  struct FileStamp {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec mtime{};
    bool operator==(const FileStamp& b) const {
      return exists == b.exists && dev == b.dev && ino == b.ino && size == b.size && mtime.tv_sec == b.mtime.tv_sec &&
             mtime.tv_nsec == b.mtime.tv_nsec;
    }
  };
  static FileStamp Stamp() {
    FileStamp f;
    struct stat st;
    if (stat("/etc/resolv.conf", &st) != 0) return f;
    f.exists = true;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.size = st.st_size;
    f.mtime = st.st_mtim;
    return f;
  }

  // /etc/resolv.conf changed: a new channel reads it, once no lookup is in
  // flight (checked at most once a second; lookups never wait for it).
  void ReloadIfChanged() {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check_ >= std::chrono::seconds(1)) {
      last_check_ = now;
      const FileStamp stamp = Stamp();
      if (!(stamp == conf_)) {
        conf_ = stamp;
        reload_ = true;
      }
    }
    if (!reload_ || !waiting_.empty()) return;
    ares_channel fresh = nullptr;
    if (NewChannel(&fresh) != ARES_SUCCESS) return;  // keep the servers it had
    ares_destroy(channel_);
    channel_ = fresh;
    reload_ = false;
  }

  void Loop() {
    std::vector<pollfd> fds;
    for (;;) {
      std::deque<std::pair<std::string, Callback>> batch;
      bool stop;
      {
        std::lock_guard lock(mu_);
        batch.swap(queue_);
        stop = stopping_;
      }
      if (stop) {
        for (auto& [host, done] : batch) done(Error{"resolve", AresReason(ARES_EDESTRUCTION)});
        if (channel_ != nullptr) ares_destroy(channel_);  // answers every pending query with EDESTRUCTION
        channel_ = nullptr;
        return;
      }
      ReloadIfChanged();
      for (auto& [host, done] : batch) Start(host, std::move(done));
      fds.clear();
      fds.push_back({wake_, POLLIN, 0});
      for (const auto& [fd, events] : sockets_) fds.push_back({fd, events, 0});
      timeval max{1, 0}, tv{};
      const timeval* t = ares_timeout(channel_, &max, &tv);
      const int ms = static_cast<int>(t->tv_sec * 1000 + (t->tv_usec + 999) / 1000);
      const int n = poll(fds.data(), fds.size(), ms);
      if (n < 0 && errno != EINTR) continue;
      if (fds[0].revents & POLLIN) {
        uint64_t count;
        (void)!read(wake_, &count, sizeof count);
      }
      bool any = false;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        any = true;
        const bool r = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
        const bool w = fds[i].revents & (POLLOUT | POLLERR | POLLHUP);
        ares_process_fd(channel_, r ? fds[i].fd : ARES_SOCKET_BAD, w ? fds[i].fd : ARES_SOCKET_BAD);
      }
      if (!any) ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
    }
  }

  SystemResolverOptions options_;
  ares_channel channel_ = nullptr;
  int init_status_ = ARES_SUCCESS;
  bool started_ = false;
  FileStamp conf_;  // the loop thread's alone, after the constructor
  std::chrono::steady_clock::time_point last_check_{};
  bool reload_ = false;
  int wake_ = -1;
  std::mutex mu_;
  bool stopping_ = false;
  std::deque<std::pair<std::string, Callback>> queue_;
  // The loop thread's alone:
  std::unordered_map<ares_socket_t, short> sockets_;
  std::unordered_map<std::string, std::vector<Callback>> waiting_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Resolver> MakeSystemResolver(const SystemResolverOptions& options) {
  return std::make_unique<AresResolver>(options);
}

Resolver::Answer FileResolver::Lookup(const std::string& host) {
  std::lock_guard lock(mu_);
  std::string why;
  const auto text = ReadFileUpTo(path_, 1u << 20, &why);
  if (!text) return Error{"resolve", "cannot read the test resolver file " + path_ + ": " + why};
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string name;
    if (!(words >> name) || name != host) continue;
    std::vector<std::string> answers;
    for (std::string a; words >> a;) answers.push_back(a);
    if (answers.empty()) break;
    const size_t n = lookups_[host]++;
    const std::string& answer = answers[std::min(n, answers.size() - 1)];
    std::vector<IpAddress> out;
    std::istringstream addrs(answer);
    for (std::string a; std::getline(addrs, a, ',');) {
      auto ip = ParseIpAddress(a);
      if (!ip) return Error{"resolve", "test resolver file: not an address: " + a};
      out.push_back(*ip);
    }
    if (out.empty()) break;
    return out;
  }
  return Error{"resolve", "cannot resolve: not in the test resolver file"};
}

}  // namespace oarbank::egress
