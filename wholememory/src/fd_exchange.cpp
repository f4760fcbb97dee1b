#include "fd_exchange.hpp"

#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace wholememory::detail {

namespace {

using steady = std::chrono::steady_clock;

/// What each rank sends on its connection; the descriptor itself rides in SCM_RIGHTS.
struct fd_message {
  std::uint64_t tag;  // guards against a stray connection from an unrelated exchange
  std::int32_t rank;
  std::int32_t has_fd;
};

// Large enough that every local rank's connect() completes before anyone accepts: the
// exchange connects and sends first and accepts afterwards, which relies on the backlog.
constexpr int listen_backlog = 128;

std::uint64_t random_tag() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
}

struct abstract_address {
  sockaddr_un addr{};
  socklen_t length = 0;
};

/// An abstract-namespace name: the leading NUL keeps it out of the file system, so nothing
/// is left behind when a rank dies.
abstract_address socket_address(std::uint64_t tag, int rank) {
  char name[64];
  int len = std::snprintf(name, sizeof(name), "wholestore/%016llx/%d",
                          static_cast<unsigned long long>(tag), rank);
  abstract_address a;
  a.addr.sun_family = AF_UNIX;
  a.addr.sun_path[0] = '\0';
  std::memcpy(a.addr.sun_path + 1, name, static_cast<std::size_t>(len));
  a.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
  return a;
}

int remaining_ms(steady::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, INT32_MAX));
}

/// Waits until `fd` is ready for `events`; throws timeout_error at `deadline`.
void wait_ready(int fd, short events, steady::time_point deadline, const char* what) {
  for (;;) {
    if (interrupt_requested())
      WM_FAIL(interrupted_error, "allgather_local_fds: interrupted " << what);
    const int left = remaining_ms(deadline);
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, std::min(left, interrupt_poll_ms));
    if (n > 0) return;
    if (n == 0 && left <= interrupt_poll_ms)
      WM_FAIL(timeout_error, "allgather_local_fds: timed out " << what);
    if (n == 0) continue;
    if (errno != EINTR) {
      int err = errno;
      WM_FAIL(system_error, "allgather_local_fds: poll failed " << what << ": " << errno_text(err));
    }
  }
}

unique_fd bind_listener(const abstract_address& address) {
  int raw = -1;
  WM_SYSCALL_TRY(raw = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  unique_fd sock(raw);
  WM_SYSCALL_TRY(
      ::bind(sock.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.length));
  WM_SYSCALL_TRY(::listen(sock.get(), listen_backlog));
  return sock;
}

void send_message(const abstract_address& address, const fd_message& msg, int fd, int peer,
                  steady::time_point deadline) {
  int raw = -1;
  WM_SYSCALL_TRY(raw = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  unique_fd sock(raw);
  // Bounds a connect() that waits for backlog space and a send() that waits for buffer space.
  const int ms = std::max(remaining_ms(deadline), 1);
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  WM_SYSCALL_TRY(::setsockopt(sock.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
  for (;;) {
    if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.length) ==
        0)
      break;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EINPROGRESS)
      WM_FAIL(timeout_error, "allgather_local_fds: timed out connecting to rank " << peer);
    WM_FAIL(system_error,
            "allgather_local_fds: connect to rank " << peer << " failed: " << errno_text(err));
  }

  iovec iov{const_cast<fd_message*>(&msg), sizeof(msg)};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&header);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  ssize_t sent = -1;
  do {
    sent = ::sendmsg(sock.get(), &header, MSG_NOSIGNAL);
  } while (sent == -1 && errno == EINTR);
  if (sent == -1) {
    int err = errno;
    WM_FAIL(system_error,
            "allgather_local_fds: sendmsg to rank " << peer << " failed: " << errno_text(err));
  }
  // A 16-byte message on a Unix stream socket is never split in practice, and the receiver
  // insists on the whole message; a short send is reported rather than patched up.
  if (static_cast<std::size_t>(sent) != sizeof(msg))
    WM_FAIL(system_error, "allgather_local_fds: short send to rank "
                              << peer << " (" << sent << " of " << sizeof(msg) << " bytes)");
}

struct received {
  fd_message msg{};
  unique_fd fd;
  long peer_pid = -1;
};

received receive_message(int listener, steady::time_point deadline) {
  wait_ready(listener, POLLIN, deadline, "waiting for a local rank to connect");
  int raw = -1;
  for (;;) {
    raw = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (raw >= 0) break;
    if (errno == EINTR || errno == ECONNABORTED) continue;
    int err = errno;
    WM_FAIL(system_error, "allgather_local_fds: accept4 failed: " << errno_text(err));
  }
  unique_fd conn(raw);

  received result;
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  WM_SYSCALL_TRY(::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_len));
  result.peer_pid = static_cast<long>(cred.pid);

  auto* bytes = reinterpret_cast<char*>(&result.msg);
  std::size_t got = 0;
  while (got < sizeof(result.msg)) {
    wait_ready(conn.get(), POLLIN, deadline, "receiving from a local rank");
    iovec iov{bytes + got, sizeof(result.msg) - got};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(conn.get(), &header, MSG_CMSG_CLOEXEC);
    if (n == -1) {
      if (errno == EINTR || errno == EAGAIN) continue;
      int err = errno;
      WM_FAIL(system_error, "allgather_local_fds: recvmsg failed: " << errno_text(err));
    }
    // Take ownership of every descriptor that arrived before any check can throw.
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (result.fd.valid())
          WM_FAIL(system_error, "allgather_local_fds: more than one descriptor received");
        result.fd.reset(fd);
      }
    }
    if ((header.msg_flags & MSG_CTRUNC) != 0)
      WM_FAIL(system_error, "allgather_local_fds: control data truncated");
    if (n == 0)
      WM_FAIL(system_error, "allgather_local_fds: peer closed after "
                                << got << " of " << sizeof(result.msg) << " bytes");
    got += static_cast<std::size_t>(n);
  }
  return result;
}

/// One bootstrap round in which every rank reports whether its part succeeded, so that a
/// failure on one rank fails the call on all of them instead of leaving them waiting.
void agree_on_status(bootstrap& bs, bool ok, const char* phase) {
  std::int32_t mine = ok ? 0 : 1;
  std::vector<std::int32_t> all(static_cast<std::size_t>(bs.size()));
  bs.allgather(&mine, all.data(), sizeof(mine));
  if (!ok) return;  // the caller rethrows its own error
  for (int r = 0; r < bs.size(); ++r) {
    if (all[r] != 0)
      WM_FAIL(system_error, "allgather_local_fds: rank " << r << " failed while " << phase);
  }
}

}  // namespace

std::vector<unique_fd> allgather_local_fds(bootstrap& bs, const rank_topology& topology, int fd) {
  const int me = bs.rank();
  const int local_size = topology.local_size;
  WM_EXPECTS(static_cast<int>(topology.local_ranks.size()) == local_size &&
                 topology.local_rank >= 0 && topology.local_rank < local_size &&
                 topology.local_ranks[topology.local_rank] == me,
             "topology does not describe rank " << me << " (local rank " << topology.local_rank
                                                << " of " << local_size << ")");

  // A fresh tag per call keeps concurrent or back-to-back exchanges from meeting each other.
  std::uint64_t tag = me == 0 ? random_tag() : 0;
  bs.broadcast(&tag, sizeof(tag), 0);

  std::vector<unique_fd> result(static_cast<std::size_t>(local_size));
  unique_fd listener;
  std::exception_ptr failure;
  try {
    if (fd >= 0) {
      int copy = -1;
      WM_SYSCALL_TRY(copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0));
      result[topology.local_rank].reset(copy);
    }
    if (local_size > 1) listener = bind_listener(socket_address(tag, me));
  } catch (...) {
    failure = std::current_exception();
  }
  agree_on_status(bs, failure == nullptr, "binding its socket");
  if (failure) std::rethrow_exception(failure);

  try {
    const auto deadline = steady::now() + bs.timeout();
    const fd_message msg{tag, me, fd >= 0 ? 1 : 0};
    for (int peer : topology.local_ranks) {
      if (peer != me) send_message(socket_address(tag, peer), msg, fd, peer, deadline);
    }
    std::vector<bool> seen(static_cast<std::size_t>(local_size), false);
    for (int i = 1; i < local_size; ++i) {
      received got = receive_message(listener.get(), deadline);
      const int from = got.msg.rank;
      auto pos = std::find(topology.local_ranks.begin(), topology.local_ranks.end(), from);
      if (got.msg.tag != tag || pos == topology.local_ranks.end() || from == me)
        WM_FAIL(system_error, "allgather_local_fds: unexpected message (rank "
                                  << from << ") on rank " << me << "'s socket");
      const auto local = static_cast<std::size_t>(pos - topology.local_ranks.begin());
      if (seen[local]) WM_FAIL(system_error, "allgather_local_fds: rank " << from << " twice");
      if (static_cast<std::size_t>(from) < topology.pids.size() &&
          got.peer_pid != topology.pids[from])
        WM_FAIL(system_error, "allgather_local_fds: connection claiming rank "
                                  << from << " came from pid " << got.peer_pid << ", expected "
                                  << topology.pids[from]);
      if ((got.msg.has_fd != 0) != got.fd.valid())
        WM_FAIL(system_error, "allgather_local_fds: rank "
                                  << from
                                  << (got.fd.valid() ? " sent an unannounced descriptor"
                                                     : " announced a descriptor but none "
                                                       "arrived"));
      seen[local] = true;
      result[local] = std::move(got.fd);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  listener.reset();
  agree_on_status(bs, failure == nullptr, "exchanging descriptors");
  if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace wholememory::detail
