/*
 * request_interrupt(): a wait for a peer that never comes ends with interrupted_error within
 * a few polls instead of at the timeout (60 s here), in each kind of wait: a TCP bootstrap that
 * waits for its peers to join, a bootstrap round, a host-communicator collective (ranks in
 * separate processes: the interrupt flag is per process).  The interrupted communicator is
 * unusable afterwards and says so; a peer that arrives later fails at once instead of waiting
 * out its timeout.  Each body runs in a forked child.
 */
#include "common/multiprocess.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/interrupt.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace wholestore_test {
namespace {

namespace wm = ::wholememory;
using steady = std::chrono::steady_clock;

double seconds_since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

/// Runs `body` in a forked child; a thread of the child requests an interrupt after `after`.
/// Returns the child's exit status (0 when its expectations held).
int in_child_interrupted_after(std::chrono::milliseconds after, const std::function<void()>& body) {
  before_fork();
  pid_t pid = ::fork();
  if (pid == 0) {
    std::thread ctrl_c([after] {
      std::this_thread::sleep_for(after);
      wm::request_interrupt();
    });
    int code = 0;
    try {
      body();
      if (child_failed()) code = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the child threw: %s\n", e.what());
      code = 1;
    }
    ctrl_c.join();
    std::fflush(stderr);
    ::_exit(code);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(Interrupt, FlagIsSetAndCleared) {
  EXPECT_FALSE(wm::interrupt_requested());
  wm::request_interrupt();
  EXPECT_TRUE(wm::interrupt_requested());
  wm::request_interrupt();
  EXPECT_TRUE(wm::interrupt_requested());
  wm::clear_interrupt();
  EXPECT_FALSE(wm::interrupt_requested());
}

// Rank 0 of two waits for rank 1 to join; rank 1 never comes.
TEST(Interrupt, EndsABootstrapWaitingForItsPeers) {
  const int port = free_port();
  EXPECT_EQ(in_child_interrupted_after(
                std::chrono::milliseconds(300),
                [port] {
                  const auto start = steady::now();
                  try {
                    wm::make_tcp_bootstrap(0, 2, "127.0.0.1", port, std::chrono::seconds(60));
                    ADD_FAILURE() << "the bootstrap formed without rank 1";
                  } catch (const wm::interrupted_error& e) {
                    EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos)
                        << e.what();
                  }
                  EXPECT_LT(seconds_since(start), 2.0);
                }),
            0);
}

// Rank 1 of two retries its connection to a store that never starts.
TEST(Interrupt, EndsAConnectionRetryLoop) {
  const int port = free_port();
  EXPECT_EQ(in_child_interrupted_after(std::chrono::milliseconds(300),
                                       [port] {
                                         const auto start = steady::now();
                                         EXPECT_THROW(
                                             wm::make_tcp_bootstrap(1, 2, "127.0.0.1", port,
                                                                    std::chrono::seconds(60)),
                                             wm::interrupted_error);
                                         EXPECT_LT(seconds_since(start), 2.0);
                                       }),
            0);
}

// Two processes: rank 1 is interrupted in a bootstrap barrier rank 0 never joins (rank 0 waits
// on purpose); the bootstrap is unusable afterwards, and rank 0's barrier, when it finally
// comes, fails at once instead of waiting out the 60 s timeout.
TEST(Interrupt, EndsABootstrapRoundAndTheLateRankFailsFast) {
  fork_result r = fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    if (bs->rank() == 1) {
      std::thread ctrl_c([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        wm::request_interrupt();
      });
      const auto start = steady::now();
      EXPECT_THROW(bs->barrier(), wm::interrupted_error);
      EXPECT_LT(seconds_since(start), 2.0);
      ctrl_c.join();
      wm::clear_interrupt();
      EXPECT_TRUE(bs->broken());
      EXPECT_THROW(bs->barrier(), wm::timeout_error);  // unusable, even without the request
      return;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto start = steady::now();
    EXPECT_THROW(bs->barrier(), wm::timeout_error);
    EXPECT_LT(seconds_since(start), 10.0) << "the late rank waited for a rank that gave up";
  });
  EXPECT_EQ(r.status[0], 0);
  EXPECT_EQ(r.status[1], 0);
}

// The host communicator's wait: rank 0 is interrupted in a barrier rank 1 joins only later;
// rank 1 then fails at once, naming the rank that gave up.
TEST(Interrupt, EndsAHostCommunicatorCollective) {
  fork_result r = fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    comm->barrier(nullptr);  // both formed
    if (comm->rank() == 0) {
      std::thread ctrl_c([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        wm::request_interrupt();
      });
      const auto start = steady::now();
      try {
        comm->barrier(nullptr);
        ADD_FAILURE() << "the barrier completed without rank 1";
      } catch (const wm::interrupted_error& e) {
        EXPECT_NE(std::string(e.what()).find("interrupted"), std::string::npos) << e.what();
      }
      EXPECT_LT(seconds_since(start), 2.0);
      ctrl_c.join();
      wm::clear_interrupt();
      EXPECT_TRUE(comm->broken());
      EXPECT_THROW(comm->barrier(nullptr), wm::timeout_error);
      std::this_thread::sleep_for(std::chrono::seconds(2));  // rank 1 still reads the segment
      return;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto start = steady::now();
    try {
      comm->barrier(nullptr);
      ADD_FAILURE() << "the barrier completed although rank 0 gave up";
    } catch (const wm::timeout_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    }
    EXPECT_LT(seconds_since(start), 5.0) << "rank 1 waited for a rank that gave up";
  });
  EXPECT_EQ(r.status[0], 0);
  EXPECT_EQ(r.status[1], 0);
}

}  // namespace
}  // namespace wholestore_test
