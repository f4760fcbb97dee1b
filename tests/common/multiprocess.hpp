/*
 * Running a test body as several real ranks: forked processes that meet over the TCP
 * bootstrap, or threads over the thread bootstrap.  Multi-rank tests use these, never mocks of
 * the communicator.
 *
 * In a forked child, GoogleTest failures are recorded in the child only, so the child exits
 * with status 1 when its body failed (or threw) and the parent asserts that every child
 * exited 0.  Children print their own failure messages.
 */
#pragma once

#include <wholememory/bootstrap.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace wholestore_test {

using rank_body = std::function<void(std::shared_ptr<wholememory::bootstrap>)>;

/// Failed parts of the running test so far.  A forked child starts with its parent's: it
/// compares with the count at the fork (child_failed), so that a failure the parent had
/// already met does not make every child report one.
inline int failed_parts() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return 0;
  const ::testing::TestResult* result = info->result();
  int failed = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    failed += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failed;
}

/// The failed parts at the last fork of the helpers below (set before forking).
inline int& failures_at_fork() {
  static int count = 0;
  return count;
}

/// In a forked child: whether the child itself met a failure (failures_at_fork()).
inline bool child_failed() { return failed_parts() > failures_at_fork(); }

/// Flushes the standard streams and records the failures so far: call right before forking.
inline void before_fork() {
  std::fflush(stdout);
  std::fflush(stderr);
  failures_at_fork() = failed_parts();
}

/// Whether a listening socket could bind 127.0.0.1:`port` now (with SO_REUSEADDR, as the TCP
/// store binds).
inline bool port_bindable(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

/// A TCP port that was free a moment ago on 127.0.0.1, for a job's store to bind shortly
/// after.  Taken below the kernel's ephemeral range where that leaves room: a port the kernel
/// hands out for bind(0) can be handed to another process's outgoing connection before the
/// store binds it (the suite's ranks make many), one below the range never is.
inline int free_port() {
  int low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &low) != 1) low = 0;
    std::fclose(f);
  }
  constexpr int first = 10000;
  if (low > first + 1000) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> pick(first, low - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      const int port = pick(gen);
      if (port_bindable(port)) return port;
    }
  }
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

/// Exit status of each child, in rank order: the exit code, or 128 + signal.
struct fork_result {
  std::vector<int> status;
  bool all_ok() const {
    for (int s : status)
      if (s != 0) return false;
    return true;
  }
};

/// Forks `ranks` processes; each builds a TCP bootstrap on 127.0.0.1 and runs `body`.  A child
/// exits 0 when the body returned without a GoogleTest failure or exception.  `timeout` bounds
/// the bootstrap's collectives.  Waits for every child.
inline fork_result fork_ranks(int ranks, const rank_body& body,
                              std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  before_fork();
  int port = free_port();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        std::shared_ptr<wholememory::bootstrap> bs =
            wholememory::make_tcp_bootstrap(r, ranks, "127.0.0.1", port, timeout);
        body(bs);
        if (child_failed()) code = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  fork_result result;
  for (pid_t pid : pids) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    result.status.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return result;
}

/// Runs `body` as `ranks` threads of this process over the thread bootstrap.  Exceptions are
/// reported as test failures naming the rank.
inline void thread_ranks(int ranks, const rank_body& body,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto bootstraps = wholememory::make_thread_bootstraps(ranks, timeout);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::shared_ptr<wholememory::bootstrap> bs(std::move(bootstraps[r]));
    threads.emplace_back([&, r, bs] {
      try {
        body(bs);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(errors[r].empty()) << "rank " << r << " threw: " << errors[r];
  }
}

/// Forks `ranks` children that run body(rank) with MASTER_ADDR/MASTER_PORT (a free port) and a
/// WHOLESTORE_TIMEOUT of `timeout_s` set, as code that builds its own bootstrap from the
/// environment expects (the seed API).  Expects every child to exit 0.
inline void fork_with_master_env(int ranks, const std::function<void(int)>& body,
                                 int timeout_s = 20) {
  before_fork();
  std::string port = std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      ::setenv("WHOLESTORE_TIMEOUT", std::to_string(timeout_s).c_str(), 1);
      try {
        body(r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw: " << e.what();
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(child_failed() ? 1 : 0);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < ranks; ++r) {
    int st = 0;
    ::waitpid(pids[r], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " failed";
  }
}

/// Runs `body` both ways: forked processes and threads.
inline void all_modes(int ranks, const rank_body& body) {
  fork_result forked = fork_ranks(ranks, body);
  EXPECT_TRUE(forked.all_ok()) << "a forked rank failed";
  thread_ranks(ranks, body);
}

}  // namespace wholestore_test
