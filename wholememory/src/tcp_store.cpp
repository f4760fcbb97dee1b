// Rank 0's store of the TCP bootstrap (tcp_store.hpp); the protocol is described at the top
// of tcp_bootstrap.cpp.
#include "tcp_store.hpp"

#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include "bootstrap_rounds.hpp"
#include "tcp_wire.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace wholememory::detail::tcp {

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
      WM_LOG(log_level::error, "the bootstrap store stopped: " << e.what());
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
        ". Another job is using this address: give this job a MASTER_PORT (or "
        "WHOLESTORE_MASTER_PORT) of its own "
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

void store_server_deleter::operator()(store_server* s) const { delete s; }

store_server_ptr start_store_server(socket_fd listener, int size, std::chrono::milliseconds timeout,
                                    std::string job_token, std::string address) {
  return store_server_ptr(new store_server(std::move(listener), size, timeout, std::move(job_token),
                                           std::move(address)));
}

}  // namespace wholememory::detail::tcp
