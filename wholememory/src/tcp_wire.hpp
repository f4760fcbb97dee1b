/*
 * Private to the TCP bootstrap (tcp_bootstrap.cpp, tcp_store.cpp): the wire format of a round
 * (request and reply headers) and the socket helpers both sides use (tcp_socket.cpp).  Every
 * socket is non-blocking, and every wait is bounded by a deadline.
 */
#pragma once

#include "bootstrap_rounds.hpp"

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

struct addrinfo;
struct sockaddr_storage;

namespace wholememory::detail::tcp {

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

/// "host:port", IPv6 literals in brackets.
std::string endpoint_text(const std::string& host, int port);
/// How a round is named in messages: "make_tcp_bootstrap" for connect, else "allgather #3".
std::string round_text(collective_op op, std::uint64_t seq);
void set_nonblocking(int fd);
void set_nodelay(int fd);

struct addrinfo_deleter {
  void operator()(addrinfo* ai) const;
};
using addrinfo_list = std::unique_ptr<addrinfo, addrinfo_deleter>;

/// Resolves host:port for TCP; empty list and `error` set when it fails.
addrinfo_list resolve(const std::string& host, int port, bool passive, std::string& error);
/// Numeric host and port of a socket address.
std::pair<std::string, int> address_of(const sockaddr_storage& addr);
std::pair<std::string, int> local_address_of(int fd);
/// A listening socket on host:port (port 0: an ephemeral one), non-blocking.  Throws
/// system_error naming the address and the reason.
socket_fd open_listener(const std::string& host, int port);
enum class io_status { ok, closed, timed_out, interrupted };

/// Waits until `fd` is ready for `events` (poll; ok), `deadline` passes (timed_out) or an
/// interrupt is requested (interrupted, checked every interrupt_poll_ms).
io_status wait_ready(int fd, short events, clock_type::time_point deadline);

/// All of `len` bytes sent or received on the non-blocking `fd` before `deadline`.
io_status send_all(int fd, const void* data, std::size_t len, clock_type::time_point deadline);
io_status recv_all(int fd, void* data, std::size_t len, clock_type::time_point deadline);

}  // namespace wholememory::detail::tcp
