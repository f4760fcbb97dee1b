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
//
// This file is the client side; the store is in tcp_store.cpp, the wire format and socket
// helpers in tcp_wire.hpp and tcp_socket.cpp.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>

#include "bootstrap_rounds.hpp"
#include "tcp_store.hpp"
#include "tcp_wire.hpp"

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

using namespace detail::tcp;  // NOLINT(google-build-using-namespace): the bootstrap's own helpers
using detail::collective_op;

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
      server_ = start_store_server(std::move(listener), size, timeout, job_token_, store_);
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
    count_round();
    exchange(collective_op::allgather, ++seq_, bytes, 0, send, bytes, recv,
             bytes * static_cast<std::size_t>(size_));
  }

  void broadcast(void* buffer, std::size_t bytes, int root) override {
    // Only the root's bytes travel; the others declare the size for the agreement check.
    count_round();
    exchange(collective_op::broadcast, ++seq_, bytes, root, buffer, rank_ == root ? bytes : 0,
             buffer, bytes);
  }

  void barrier() override {
    count_round();
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
          const io_status w = wait_ready(
              fd.get(), POLLOUT, std::min(deadline, clock_type::now() + std::chrono::seconds(2)));
          if (w == io_status::interrupted) {
            WM_FAIL(interrupted_error, "make_tcp_bootstrap: rank "
                                           << rank_ << " was interrupted while connecting to the "
                                           << "bootstrap store at " << store_);
          }
          if (w != io_status::ok) {
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
      if (interrupt_requested()) {
        WM_FAIL(interrupted_error, "make_tcp_bootstrap: rank "
                                       << rank_ << " was interrupted while waiting for the "
                                       << "bootstrap store at " << store_);
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
    if (sent == io_status::timed_out || sent == io_status::interrupted) st = sent;
    if (st == io_status::interrupted) {
      // Closing the connection makes the store fail this round for the other ranks (or the
      // next one, if this one has completed meanwhile): nobody waits for a rank that gave up.
      broken_ = what + ": interrupted on rank " + std::to_string(rank_);
      conn_.reset();
      WM_FAIL(interrupted_error, what << ": interrupted while waiting for the bootstrap store at "
                                      << store_ << " (the bootstrap is unusable from here on)");
    }
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
  store_server_ptr server_;
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