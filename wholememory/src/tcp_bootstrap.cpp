// TCP bootstrap: processes meet at a small store served by rank 0.
//
// Each collective is one round: every rank (rank 0 too, over loopback) sends a request header
// and its payload; when the store holds all `size` requests of the round it checks that they
// agree and answers every rank with the result or with an error text.  The store, not the
// clients, knows who is missing or gone, so it is the store that names dead and late ranks:
// a closed connection fails the round at once, and a round still incomplete after the timeout
// fails naming the ranks that never came.  Clients still bound every wait by their own
// deadline, in case the store itself is gone.
//
// A store serves one job.  A process of another job that reaches it (a second job started on
// the same MASTER_PORT) is refused alone, with an error on its side, and the job goes on: its
// connect request carries a job token that must equal the store's (WHOLESTORE_JOB_TOKEN, which
// `wholestore launch` sets), and once every rank has connected the store admits nobody else,
// token or not.  Only a member of the job (same token) that is misconfigured while the job
// forms (another job size, a rank taken twice) fails the whole job, as a mismatch.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include "bootstrap_rounds.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

namespace wholememory {
namespace {

using detail::collective_op;
using detail::round_args;
using clock_type = std::chrono::steady_clock;

constexpr std::uint32_t request_magic = 0x57534231;  // "WSB1"
constexpr std::uint32_t reply_magic = 0x57534232;    // "WSB2"
// The bootstrap never carries bulk data; anything larger is a corrupt or foreign stream.
constexpr std::uint64_t max_payload = std::uint64_t{1} << 30;
// How long a client waits beyond its timeout for the store's own timeout message, which
// names the missing ranks, before giving up with a less precise one.
constexpr std::chrono::milliseconds reply_grace{1000};
// Sequence number of the store's last word to each client when it shuts down: the reason why
// no later collective can complete.  It waits in the client's socket for its next call.
constexpr std::uint64_t farewell_seq = ~std::uint64_t{0};

// Native byte order: the ranks of a job run on the same architecture.  No padding in either.
struct request_header {
  std::uint32_t magic;
  std::uint32_t op;       // collective_op
  std::uint64_t seq;      // 0 for connect
  std::uint64_t bytes;    // declared size; for connect, the job size
  std::int64_t root;      // broadcast root; for connect, the rank
  std::uint64_t payload;  // bytes that follow
};
static_assert(sizeof(request_header) == 40, "request_header must have no padding");

// refused: the store turned away a process that is not one of its job's ranks; nothing else
// was affected.
enum class reply_status : std::uint32_t { ok = 0, mismatch = 1, failed = 2, refused = 3 };

struct reply_header {
  std::uint32_t magic;
  std::uint32_t status;  // reply_status
  std::uint64_t seq;
  std::uint64_t length;  // result bytes, or error text
};
static_assert(sizeof(reply_header) == 24, "reply_header must have no padding");

// Owns one socket (or pipe end).
class socket_fd {
 public:
  socket_fd() = default;
  explicit socket_fd(int fd) : fd_(fd) {}
  socket_fd(socket_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  socket_fd& operator=(socket_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  socket_fd(const socket_fd&) = delete;
  socket_fd& operator=(const socket_fd&) = delete;
  ~socket_fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string endpoint_text(const std::string& host, int port) {
  // Bracket IPv6 literals so that the port stays readable.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string round_text(collective_op op, std::uint64_t seq) {
  if (op == collective_op::connect) return "make_tcp_bootstrap";
  return std::string(detail::op_name(op)) + " #" + std::to_string(seq);
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  WM_SYSCALL_TRY(flags);
  WM_SYSCALL_TRY(::fcntl(fd, F_SETFL, flags | O_NONBLOCK));
}

void set_nodelay(int fd) {
  // Rounds are small request/reply exchanges; Nagle would add delay to every one of them.
  int one = 1;
  WM_SYSCALL_TRY(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
}

struct addrinfo_deleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using addrinfo_list = std::unique_ptr<addrinfo, addrinfo_deleter>;

// Resolves host:port for TCP; empty list and `error` set when it fails.
addrinfo_list resolve(const std::string& host, int port, bool passive, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0) {
    error = std::string("cannot resolve '") + host + "': " + ::gai_strerror(rc);
    return addrinfo_list(nullptr);
  }
  return addrinfo_list(result);
}

// Numeric host and port of a socket address.
std::pair<std::string, int> address_of(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  }
  return {text, port};
}

std::pair<std::string, int> local_address_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  WM_SYSCALL_TRY(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len));
  return address_of(addr);
}

// A listening socket on host:port (port 0: an ephemeral one), non-blocking.
socket_fd open_listener(const std::string& host, int port) {
  std::string error;
  addrinfo_list list = resolve(host, port, true, error);
  if (!list) WM_FAIL(system_error, "bootstrap store: " << error);
  std::string last_error = "no address";
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    socket_fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = "socket: " + errno_text(errno);
      continue;
    }
    // A store of a previous job may have left the port in TIME_WAIT.
    int one = 1;
    WM_SYSCALL_TRY(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      const int err = errno;
      last_error = "bind: " + errno_text(err);
      if (err == EADDRINUSE) {
        last_error +=
            " (another job or program is using this port: give this job a MASTER_PORT "
            "of its own; `wholestore launch` picks a free one when --master-port is "
            "not given)";
      }
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      last_error = "listen: " + errno_text(errno);
      continue;
    }
    set_nonblocking(fd.get());
    return fd;
  }
  WM_FAIL(system_error,
          "bootstrap store: cannot listen on " << endpoint_text(host, port) << ": " << last_error);
}

// Waits until `fd` is ready for `events` or `deadline` passes; false on timeout.
bool wait_ready(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the following call report the error
  }
}

enum class io_status { ok, closed, timed_out };

io_status send_all(int fd, const void* data, std::size_t len, clock_type::time_point deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLOUT, deadline)) return io_status::timed_out;
    } else {
      return io_status::closed;
    }
  }
  return io_status::ok;
}

io_status recv_all(int fd, void* data, std::size_t len, clock_type::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, POLLIN, deadline)) return io_status::timed_out;
    } else {
      return io_status::closed;
    }
  }
  return io_status::ok;
}

// ---- the store -----------------------------------------------------------------------------

// Rank 0's store: a thread that serves the rounds of one bootstrap group over `listener`.  It
// owns its state alone (nothing is shared with the client side but the wake-up pipe), and
// stops and joins in the destructor.
class store_server {
 public:
  store_server(socket_fd listener, int size, std::chrono::milliseconds timeout,
               std::string job_token, std::string address)
      : listener_(std::move(listener)),
        size_(size),
        timeout_(timeout),
        job_token_(std::move(job_token)),
        address_(std::move(address)),
        by_rank_(size, nullptr),
        departed_(size, false),
        present_(size, false),
        args_(size),
        payloads_(size) {
    int fds[2];
    WM_SYSCALL_TRY(::pipe2(fds, O_CLOEXEC | O_NONBLOCK));
    wake_read_ = socket_fd(fds[0]);
    wake_write_ = socket_fd(fds[1]);
    thread_ = std::thread([this] { run(); });
  }

  ~store_server() {
    char byte = 1;
    while (::write(wake_write_.get(), &byte, 1) < 0 && errno == EINTR) {
    }
    thread_.join();
  }

  store_server(const store_server&) = delete;
  store_server& operator=(const store_server&) = delete;

 private:
  struct peer {
    socket_fd fd;
    int rank = -1;  // -1 until its connect request
    std::vector<char> in;
    std::vector<char> out;
    std::size_t out_sent = 0;
    bool closed = false;
    bool refused = false;  // turned away: closed once its reply is sent, never read again
  };

  void run() noexcept {
    try {
      serve();
      shut_down();
    } catch (const std::exception& e) {
      // Nobody to throw to: closing every connection makes the clients fail at once.
      std::fprintf(stderr, "wholememory bootstrap store: %s\n", e.what());
    }
    peers_.clear();
  }

  void serve() {
    bool stopping = false;
    std::vector<pollfd> fds;
    while (!stopping) {
      fds.clear();
      fds.push_back({wake_read_.get(), POLLIN, 0});
      fds.push_back({listener_.get(), POLLIN, 0});
      for (auto& p : peers_) {
        short events = POLLIN;
        if (p->out_sent < p->out.size()) events |= POLLOUT;
        fds.push_back({p->fd.get(), events, 0});
      }
      int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (rc < 0 && errno != EINTR) WM_SYSCALL_TRY(rc);
      if (rc > 0) {
        if (fds[0].revents != 0) stopping = true;
        if (fds[1].revents != 0) accept_peers();
        // New peers were appended after the ones polled: index by the polled prefix only.
        for (std::size_t i = 2; i < fds.size(); ++i) {
          peer& p = *peers_[i - 2];
          if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(p);
          if (!p.closed && (fds[i].revents & POLLOUT)) write_to(p);
        }
      }
      check_deadline();
      flush_all();
      remove_closed();
    }
  }

  int poll_timeout_ms() const {
    if (arrived_ == 0 || !broken_.empty()) return -1;
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(round_start_ + timeout_ - clock_type::now());
    return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
  }

  void accept_peers() {
    for (;;) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // EAGAIN, or a transient shortage (EMFILE): the clients retry or time out
      }
      auto p = std::make_unique<peer>();
      p->fd = socket_fd(fd);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      peers_.push_back(std::move(p));
    }
  }

  void read_from(peer& p) {
    char buffer[64 * 1024];
    bool eof = false;
    for (;;) {
      ssize_t n = ::recv(p.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) {
        if (!p.refused) p.in.insert(p.in.end(), buffer, buffer + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // orderly close, or a reset by a dying process
      break;
    }
    // Requests that arrived before the close still count.
    std::size_t used = 0;
    while (!p.closed && !p.refused && p.in.size() - used >= sizeof(request_header)) {
      request_header h;
      std::memcpy(&h, p.in.data() + used, sizeof(h));
      if (h.magic != request_magic || h.payload > max_payload) {
        drop(p, "sent a malformed request");
        return;
      }
      if (p.in.size() - used - sizeof(h) < h.payload) break;
      const char* body = p.in.data() + used + sizeof(h);
      std::vector<char> payload(body, body + h.payload);
      used += sizeof(h) + h.payload;
      on_request(p, h, std::move(payload));
    }
    p.in.erase(p.in.begin(), p.in.begin() + static_cast<std::ptrdiff_t>(used));
    if (eof && !p.closed) drop(p, "disconnected (died?)");
  }

  void write_to(peer& p) {
    while (p.out_sent < p.out.size()) {
      ssize_t n =
          ::send(p.fd.get(), p.out.data() + p.out_sent, p.out.size() - p.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        p.out_sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      drop(p, "disconnected (died?)");
      return;
    }
    p.out.clear();
    p.out_sent = 0;
    if (p.refused) p.closed = true;
  }

  void flush_all() {
    for (auto& p : peers_)
      if (!p->closed && p->out_sent < p->out.size()) write_to(*p);
  }

  void remove_closed() {
    // Fetches answered, or whose requester is gone, leave the waiting list first: it holds
    // pointers into peers_.
    waiting_fetches_.erase(
        std::remove_if(waiting_fetches_.begin(), waiting_fetches_.end(),
                       [](const auto& w) { return w.requester == nullptr || w.requester->closed; }),
        waiting_fetches_.end());
    peers_.erase(
        std::remove_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->closed; }),
        peers_.end());
  }

  // A peer is gone.  A round in progress can never complete without it: fail it now rather
  // than let the others wait for their timeout.  Between rounds, remember it, so that the next
  // round fails as soon as it starts.
  void drop(peer& p, const char* why) {
    p.closed = true;
    if (p.rank < 0) return;
    by_rank_[p.rank] = nullptr;
    departed_[p.rank] = true;
    if (broken_.empty() && arrived_ > 0) {
      const round_args& current = args_[first_present()];
      fail_group(reply_status::failed, "rank " + std::to_string(p.rank) + " " + why + " during " +
                                           round_text(current.op, current.seq));
    }
  }

  int first_present() const {
    return static_cast<int>(std::find(present_.begin(), present_.end(), true) - present_.begin());
  }

  void on_request(peer& p, const request_header& h, std::vector<char> payload) {
    round_args args{static_cast<collective_op>(h.op), h.seq, h.bytes, h.root};
    if (p.rank < 0) {
      if (args.op != collective_op::connect) {
        p.closed = true;  // not one of ours
        return;
      }
      const std::string token(payload.begin(), payload.end());
      std::string refusal = turn_away(h, token);
      if (!refusal.empty()) {
        // Not one of this job's ranks: it alone gets the error; the job does not notice.
        p.refused = true;
        queue_reply(p, reply_status::refused, 0, refusal.data(), refusal.size());
        write_to(p);
        return;
      }
      std::string error = admit(h);
      if (!error.empty()) {
        queue_reply(p, reply_status::mismatch, 0, error.data(), error.size());
        fail_group(reply_status::mismatch, error);
        return;
      }
      p.rank = static_cast<int>(h.root);
      by_rank_[p.rank] = &p;
      args = {collective_op::connect, 0, 0, 0};  // rank and size were checked by admit()
    }
    const int rank = p.rank;
    if (!broken_.empty()) {
      queue_reply(p, broken_status_, args.seq, broken_.data(), broken_.size());
      return;
    }
    if (args.op == collective_op::post || args.op == collective_op::fetch) {
      on_mailbox(p, args, std::move(payload));
      return;
    }
    if (present_[rank]) {
      fail_group(reply_status::failed, "rank " + std::to_string(rank) + " sent two requests in " +
                                           round_text(args.op, args.seq) + " (protocol error)");
      return;
    }
    present_[rank] = true;
    args_[rank] = args;
    payloads_[rank] = std::move(payload);
    if (arrived_++ == 0) round_start_ = clock_type::now();
    std::vector<int> departed;
    for (int r = 0; r < size_; ++r)
      if (departed_[r]) departed.push_back(r);
    if (!departed.empty()) {
      fail_group(reply_status::failed, detail::describe_ranks(departed) +
                                           " disconnected (died?) before " +
                                           round_text(args.op, args.seq));
      return;
    }
    if (arrived_ == size_) complete_round();
  }

  // The mailbox lets some ranks meet without the others (subset bootstraps): a post stores a
  // value under a key, a fetch is answered once the key has a value.  Neither takes part in
  // the rounds.  Payload: key length (8 bytes), key, then for a post the value.
  void on_mailbox(peer& p, const round_args& args, std::vector<char> payload) {
    std::uint64_t key_length = 0;
    if (payload.size() < sizeof(key_length)) {
      drop(p, "sent a malformed mailbox request");
      return;
    }
    std::memcpy(&key_length, payload.data(), sizeof(key_length));
    if (key_length > payload.size() - sizeof(key_length)) {
      drop(p, "sent a malformed mailbox request");
      return;
    }
    std::string key(payload.data() + sizeof(key_length), key_length);
    if (args.op == collective_op::post) {
      std::vector<char> value(
          payload.begin() + static_cast<std::ptrdiff_t>(sizeof(key_length) + key_length),
          payload.end());
      queue_reply(p, reply_status::ok, args.seq, nullptr, 0);
      for (auto& w : waiting_fetches_) {
        if (w.requester != nullptr && w.key == key) {
          queue_reply(*w.requester, reply_status::ok, w.seq, value.data(), value.size());
          w.requester = nullptr;
        }
      }
      mailbox_[key] = std::move(value);
      return;
    }
    auto it = mailbox_.find(key);
    if (it != mailbox_.end()) {
      queue_reply(p, reply_status::ok, args.seq, it->second.data(), it->second.size());
    } else {
      waiting_fetches_.push_back({&p, std::move(key), args.seq});
    }
  }

  // A connect request from a process that is not one of this job's ranks: the error text it
  // gets, or empty.  Another token is another job; after the job has formed nobody can join,
  // whatever it says (a stranger without a token, or one of the same shape).
  std::string turn_away(const request_header& h, const std::string& token) const {
    const std::string who = "the bootstrap store at " + address_ + " refused this process (rank " +
                            std::to_string(h.root) + " of " + std::to_string(h.bytes) + "): ";
    const std::string advice =
        ". Another job is using this address: give this job a MASTER_PORT of its own "
        "(`wholestore launch` picks a free one when --master-port is not given)";
    if (token != job_token_) {
      return who + "it serves another job (" +
             (job_token_.empty() ? std::string("which has no job token, and this process has one")
              : token.empty()    ? std::string("whose job token this process lacks")
                                 : std::string("its job token differs")) +
             ")" + advice;
    }
    if (formed_) {
      return who + "its job's " + std::to_string(size_) + " rank(s) have all connected already" +
             advice;
    }
    return {};
  }

  // Checks a connect request of this job; returns the error text when it cannot join.
  std::string admit(const request_header& h) const {
    std::string who = "a process that connected as rank " + std::to_string(h.root);
    if (h.bytes != static_cast<std::uint64_t>(size_)) {
      return "make_tcp_bootstrap: " + who + " passed size " + std::to_string(h.bytes) +
             ", rank 0 passed size " + std::to_string(size_);
    }
    if (h.root < 0 || h.root >= size_) {
      return "make_tcp_bootstrap: " + who + ", but ranks are 0.." + std::to_string(size_ - 1);
    }
    if (by_rank_[h.root] != nullptr || departed_[h.root]) {
      return "make_tcp_bootstrap: two processes connected as rank " + std::to_string(h.root);
    }
    return {};
  }

  void complete_round() {
    const round_args& first = args_[0];
    if (first.op == collective_op::connect) formed_ = true;
    std::string error = detail::check_round(args_);
    if (!error.empty()) {
      for (int r = 0; r < size_; ++r)
        queue_reply(*by_rank_[r], reply_status::mismatch, args_[r].seq, error.data(), error.size());
    } else {
      std::vector<char> result;
      if (first.op == collective_op::allgather) {
        for (const auto& payload : payloads_)
          result.insert(result.end(), payload.begin(), payload.end());
      } else if (first.op == collective_op::broadcast) {
        result = std::move(payloads_[first.root]);
      }
      for (int r = 0; r < size_; ++r)
        queue_reply(*by_rank_[r], reply_status::ok, first.seq, result.data(), result.size());
    }
    reset_round();
  }

  void reset_round() {
    std::fill(present_.begin(), present_.end(), false);
    for (auto& payload : payloads_) payload = {};
    arrived_ = 0;
  }

  // From now on every request fails with `message`: the ranks can no longer agree on where
  // they are.  The ranks waiting in the current round get it now.
  void fail_group(reply_status status, std::string message) {
    broken_ = std::move(message);
    broken_status_ = status;
    for (int r = 0; r < size_; ++r) {
      if (present_[r] && by_rank_[r] != nullptr) {
        queue_reply(*by_rank_[r], status, args_[r].seq, broken_.data(), broken_.size());
      }
    }
    reset_round();
  }

  void check_deadline() {
    if (arrived_ == 0 || !broken_.empty() || clock_type::now() < round_start_ + timeout_) return;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (!present_[r]) missing.push_back(r);
    const round_args& current = args_[first_present()];
    const bool connecting = current.op == collective_op::connect;
    fail_group(reply_status::failed, round_text(current.op, current.seq) + ": " +
                                         detail::describe_ranks(missing) +
                                         (connecting ? " did not connect" : " did not arrive") +
                                         " within " + std::to_string(timeout_.count()) + " ms");
  }

  void queue_reply(peer& p, reply_status status, std::uint64_t seq, const void* data,
                   std::size_t length) {
    reply_header h{reply_magic, static_cast<std::uint32_t>(status), seq, length};
    const char* head = reinterpret_cast<const char*>(&h);
    p.out.insert(p.out.end(), head, head + sizeof(h));
    const char* body = static_cast<const char*>(data);
    if (length > 0) p.out.insert(p.out.end(), body, body + length);
  }

  // Rank 0's bootstrap is going away.  Anybody still in a round waits in vain: tell them.  Then
  // hand over what is queued, within a bound, and close write sides first so that the clients
  // read every reply before they see the end of the stream.
  void shut_down() {
    if (broken_.empty() && arrived_ > 0) {
      const round_args& current = args_[first_present()];
      fail_group(reply_status::failed, "rank 0 (host of the bootstrap store) left during " +
                                           round_text(current.op, current.seq));
    }
    const std::string farewell =
        broken_.empty() ? std::string("rank 0 (host of the bootstrap store) has left") : broken_;
    for (auto& p : peers_) {
      if (p->rank >= 0 && !p->closed) {
        queue_reply(*p, reply_status::failed, farewell_seq, farewell.data(), farewell.size());
      }
    }
    const auto deadline =
        clock_type::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(10));
    for (;;) {
      flush_all();
      remove_closed();
      std::vector<pollfd> fds;
      for (auto& p : peers_)
        if (p->out_sent < p->out.size()) fds.push_back({p->fd.get(), POLLOUT, 0});
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
      if (fds.empty() || left.count() <= 0) break;
      ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    }
    char buffer[4096];
    for (auto& p : peers_) {
      ::shutdown(p->fd.get(), SHUT_WR);
      // Unread input at close() would turn the close into a reset, which may discard replies
      // the client has not read yet.
      while (::recv(p->fd.get(), buffer, sizeof(buffer), 0) > 0) {
      }
    }
  }

  socket_fd listener_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  const std::string job_token_;
  const std::string address_;  // host:port, for messages
  bool formed_ = false;        // every rank has connected: nobody else may join
  socket_fd wake_read_;
  socket_fd wake_write_;
  std::vector<std::unique_ptr<peer>> peers_;
  std::vector<peer*> by_rank_;
  std::vector<bool> departed_;
  // The round in progress.
  std::vector<bool> present_;
  std::vector<round_args> args_;
  std::vector<std::vector<char>> payloads_;
  // The mailbox (see on_mailbox).
  struct waiting_fetch {
    peer* requester;
    std::string key;
    std::uint64_t seq;
  };
  std::map<std::string, std::vector<char>> mailbox_;
  std::vector<waiting_fetch> waiting_fetches_;
  int arrived_ = 0;
  clock_type::time_point round_start_;
  // Set once the group cannot go on.
  std::string broken_;
  reply_status broken_status_ = reply_status::failed;
  std::thread thread_;  // last: starts after everything above is ready
};

// ---- the client ----------------------------------------------------------------------------

class tcp_bootstrap final : public bootstrap {
 public:
  // `listener` is valid on the rank that hosts the store (rank 0 of the group) and invalid
  // elsewhere; the others connect to host:port.
  tcp_bootstrap(int rank, int size, const std::string& host, int port,
                std::chrono::milliseconds timeout, std::string job_token, socket_fd listener)
      : rank_(rank),
        size_(size),
        timeout_(timeout),
        job_token_(std::move(job_token)),
        store_(endpoint_text(host, port)) {
    std::string connect_host = host;
    int connect_port = port;
    if (listener.valid()) {
      auto [bound_host, bound_port] = local_address_of(listener.get());
      connect_port = bound_port;
      // A wildcard bind is reached over loopback from this process.
      if (bound_host == "0.0.0.0") bound_host = "127.0.0.1";
      if (bound_host == "::") bound_host = "::1";
      connect_host = bound_host;
      store_ = endpoint_text(host, bound_port);
      server_ =
          std::make_unique<store_server>(std::move(listener), size, timeout, job_token_, store_);
    }
    connect_to(connect_host, connect_port);
    exchange(collective_op::connect, 0, static_cast<std::uint64_t>(size), rank, job_token_.data(),
             job_token_.size(), nullptr, 0);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  bool broken() const override { return !broken_.empty(); }

  void allgather(const void* send, void* recv, std::size_t bytes) override {
    exchange(collective_op::allgather, ++seq_, bytes, 0, send, bytes, recv,
             bytes * static_cast<std::size_t>(size_));
  }

  void broadcast(void* buffer, std::size_t bytes, int root) override {
    // Only the root's bytes travel; the others declare the size for the agreement check.
    exchange(collective_op::broadcast, ++seq_, bytes, root, buffer, rank_ == root ? bytes : 0,
             buffer, bytes);
  }

  void barrier() override {
    exchange(collective_op::barrier, ++seq_, 0, 0, nullptr, 0, nullptr, 0);
  }

  std::unique_ptr<bootstrap> split(int color, int key) override {
    std::int32_t mine[2] = {color, key};
    std::vector<std::int32_t> all(2 * static_cast<std::size_t>(size_));
    allgather(mine, all.data(), sizeof(mine));
    std::vector<int> members;  // old ranks of my group, in new-rank order
    if (color >= 0) {
      for (int r = 0; r < size_; ++r)
        if (all[2 * r] == color) members.push_back(r);
      std::stable_sort(members.begin(), members.end(),
                       [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    }
    // The group's first member hosts its store, on the address by which it reaches this
    // bootstrap's store: one that the other members, wherever they run, can reach too.
    struct endpoint {
      char host[64];
      std::int32_t port;
    };
    endpoint my_endpoint{};
    socket_fd listener;
    if (!members.empty() && members.front() == rank_) {
      std::string host = local_address_of(conn_.get()).first;
      listener = open_listener(host, 0);
      std::snprintf(my_endpoint.host, sizeof(my_endpoint.host), "%s", host.c_str());
      my_endpoint.port = local_address_of(listener.get()).second;
    }
    std::vector<endpoint> endpoints(size_);
    allgather(&my_endpoint, endpoints.data(), sizeof(endpoint));
    if (members.empty()) return nullptr;
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    const endpoint& leader = endpoints[members.front()];
    return std::make_unique<tcp_bootstrap>(new_rank, static_cast<int>(members.size()),
                                           std::string(leader.host), leader.port, timeout_,
                                           job_token_, std::move(listener));
  }

  std::unique_ptr<bootstrap> subset(const std::vector<int>& members) override {
    detail::check_subset_members(members, rank_, size_);
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    // Calls for the same member list pair up in order, so the count names the meeting.
    std::string key = "subset";
    for (int m : members) key += " " + std::to_string(m);
    key += " #" + std::to_string(subset_calls_[members]++);
    struct endpoint {
      char host[64];
      std::int32_t port;
    };
    endpoint leader{};
    socket_fd listener;
    if (new_rank == 0) {
      // The first member hosts the subset's store, as in split().
      std::string host = local_address_of(conn_.get()).first;
      listener = open_listener(host, 0);
      std::snprintf(leader.host, sizeof(leader.host), "%s", host.c_str());
      leader.port = local_address_of(listener.get()).second;
      std::vector<char> request = mailbox_request(key, &leader, sizeof(leader));
      exchange(collective_op::post, next_mail_seq(), request.size(), 0, request.data(),
               request.size(), nullptr, 0);
    } else {
      std::vector<char> request = mailbox_request(key, nullptr, 0);
      exchange(collective_op::fetch, next_mail_seq(), request.size(), 0, request.data(),
               request.size(), &leader, sizeof(leader));
    }
    return std::make_unique<tcp_bootstrap>(new_rank, static_cast<int>(members.size()),
                                           std::string(leader.host), leader.port, timeout_,
                                           job_token_, std::move(listener));
  }

 private:
  static std::vector<char> mailbox_request(const std::string& key, const void* value,
                                           std::size_t value_bytes) {
    std::uint64_t key_length = key.size();
    std::vector<char> out(sizeof(key_length) + key.size() + value_bytes);
    std::memcpy(out.data(), &key_length, sizeof(key_length));
    std::memcpy(out.data() + sizeof(key_length), key.data(), key.size());
    if (value_bytes > 0)
      std::memcpy(out.data() + sizeof(key_length) + key.size(), value, value_bytes);
    return out;
  }

  // Mailbox calls are numbered apart from the rounds (top bit set), whose numbers the ranks
  // must agree on.
  std::uint64_t next_mail_seq() { return (std::uint64_t{1} << 63) | ++mail_seq_; }

  // Connects to the store, retrying until the timeout: its host may start after us.
  void connect_to(const std::string& host, int port) {
    const auto deadline = clock_type::now() + timeout_;
    auto pause = std::chrono::milliseconds(20);
    std::string last_error;
    for (;;) {
      addrinfo_list list = resolve(host, port, false, last_error);
      for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
        socket_fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                              ai->ai_protocol));
        if (!fd.valid()) {
          last_error = "socket: " + errno_text(errno);
          continue;
        }
        int rc = ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
        int err = rc == 0 ? 0 : errno;
        if (err == EINPROGRESS || err == EINTR) {
          // Bound each attempt, so that a black-holed address does not eat the whole timeout.
          if (!wait_ready(fd.get(), POLLOUT,
                          std::min(deadline, clock_type::now() + std::chrono::seconds(2)))) {
            last_error = "connect: timed out";
            continue;
          }
          socklen_t len = sizeof(err);
          ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        }
        if (err != 0) {
          last_error = "connect: " + errno_text(err);
          continue;
        }
        set_nodelay(fd.get());
        conn_ = std::move(fd);
        return;
      }
      if (clock_type::now() + pause >= deadline) {
        WM_FAIL(timeout_error, "make_tcp_bootstrap: rank "
                                   << rank_ << " could not reach the bootstrap store at " << store_
                                   << " within " << timeout_.count()
                                   << " ms (is rank 0 running?): " << last_error);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }

  // One round: sends this rank's request, waits for the store's reply.  `recv` receives
  // `recv_bytes` bytes on success.
  void exchange(collective_op op, std::uint64_t seq, std::uint64_t bytes, std::int64_t root,
                const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes) {
    const std::string what = round_text(op, seq);
    if (!broken_.empty()) {
      WM_FAIL(timeout_error, what << ": bootstrap unusable after an earlier failure: " << broken_);
    }
    const auto deadline = clock_type::now() + timeout_ + reply_grace;
    request_header request{request_magic, static_cast<std::uint32_t>(op), seq, bytes, root,
                           send_bytes};
    io_status sent = send_all(conn_.get(), &request, sizeof(request), deadline);
    if (sent == io_status::ok && send_bytes > 0) {
      sent = send_all(conn_.get(), send, send_bytes, deadline);
    }
    // Read even when the send failed: a store that shut down left its reason in our socket.
    reply_header reply{};
    io_status st = recv_all(conn_.get(), &reply, sizeof(reply), deadline);
    if (sent == io_status::timed_out) st = io_status::timed_out;
    if (st == io_status::ok && reply.magic != reply_magic) {
      fail(with_store(what, "the store sent a malformed reply"));
    }
    const bool farewell = st == io_status::ok && reply.seq == farewell_seq;
    if (st == io_status::ok && !farewell && reply.seq != seq) {
      fail(with_store(what, "the store replied to call #" + std::to_string(reply.seq)));
    }
    if (st == io_status::ok && reply.status == static_cast<std::uint32_t>(reply_status::ok)) {
      if (reply.length != recv_bytes) {
        fail(with_store(what, "the store replied " + std::to_string(reply.length) +
                                  " bytes, expected " + std::to_string(recv_bytes)));
      }
      if (recv_bytes > 0) st = recv_all(conn_.get(), recv, recv_bytes, deadline);
      if (st == io_status::ok) return;
    }
    std::string text;
    if (st == io_status::ok) {
      text.resize(std::min<std::uint64_t>(reply.length, max_payload));
      st = recv_all(conn_.get(), text.data(), text.size(), deadline);
    }
    if (st == io_status::closed) {
      fail(what + ": lost the connection to the bootstrap store at " + store_ +
           " (rank 0 died or left?)");
    }
    if (st == io_status::timed_out) {
      fail(what + ": no reply from the bootstrap store at " + store_ + " within " +
           std::to_string((timeout_ + reply_grace).count()) + " ms (a peer is late or hung)");
    }
    if (farewell) fail(what + ": " + text);
    if (reply.status == static_cast<std::uint32_t>(reply_status::refused)) {
      // Nothing is out of step: this process never was one of the job's ranks.
      WM_FAIL(logic_error, text);
    }
    if (reply.status == static_cast<std::uint32_t>(reply_status::mismatch)) {
      // The ranks are still in step after a mismatch: the next round may succeed.
      WM_FAIL(mismatch_error, text);
    }
    fail(text);
  }

  std::string with_store(const std::string& what, const std::string& why) const {
    return what + ": " + why + " (store at " + store_ + ")";
  }

  // The connection is out of step from here on: every later call fails with the same reason.
  [[noreturn]] void fail(const std::string& message) {
    broken_ = message;
    WM_FAIL(timeout_error, message);
  }

  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  const std::string job_token_;
  std::string store_;  // host:port, for messages
  // Declared before conn_, so destroyed after it: the store sees this rank leave first.
  std::unique_ptr<store_server> server_;
  socket_fd conn_;
  std::uint64_t seq_ = 0;
  std::uint64_t mail_seq_ = 0;
  std::map<std::vector<int>, int> subset_calls_;
  std::string broken_;
};

}  // namespace

std::unique_ptr<bootstrap> make_tcp_bootstrap(int rank, int size, const std::string& host, int port,
                                              std::chrono::milliseconds timeout,
                                              const std::string& job_token) {
  WM_EXPECTS(size >= 1, "make_tcp_bootstrap: size " << size << " must be at least 1");
  WM_EXPECTS(rank >= 0 && rank < size,
             "make_tcp_bootstrap: rank " << rank << " is out of range [0, " << size << ")");
  WM_EXPECTS(port >= 0 && port <= 65535,
             "make_tcp_bootstrap: port " << port << " is out of range [0, 65535]");
  WM_EXPECTS(port > 0 || rank == 0,
             "make_tcp_bootstrap: rank " << rank << " cannot connect to port 0");
  WM_EXPECTS(!host.empty(), "make_tcp_bootstrap: empty host");
  WM_EXPECTS(timeout.count() > 0,
             "make_tcp_bootstrap: timeout " << timeout.count() << " ms must be positive");
  detail::check_job_token(job_token, "make_tcp_bootstrap: job token");
  socket_fd listener;
  if (rank == 0) listener = open_listener(host, port);
  return std::make_unique<tcp_bootstrap>(rank, size, host, port, timeout, job_token,
                                         std::move(listener));
}

}  // namespace wholememory
