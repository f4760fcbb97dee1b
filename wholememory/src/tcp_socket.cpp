// Socket helpers of the TCP bootstrap (tcp_wire.hpp).
#include "tcp_wire.hpp"

#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

namespace wholememory::detail::tcp {

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

void addrinfo_deleter::operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }

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
            "(or WHOLESTORE_MASTER_PORT) of its own; `wholestore launch` picks a free one when "
            "--master-port is "
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

io_status wait_ready(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    if (interrupt_requested()) return io_status::interrupted;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return io_status::timed_out;
    pollfd p{fd, events, 0};
    int rc =
        ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), interrupt_poll_ms)));
    if (rc > 0) return io_status::ok;
    if (rc < 0 && errno != EINTR) return io_status::ok;  // the following call reports the error
  }
}

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
      if (io_status w = wait_ready(fd, POLLOUT, deadline); w != io_status::ok) return w;
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
      if (io_status w = wait_ready(fd, POLLIN, deadline); w != io_status::ok) return w;
    } else {
      return io_status::closed;
    }
  }
  return io_status::ok;
}

}  // namespace wholememory::detail::tcp
