// Bootstrap tests: every collective as threads of one process and as forked processes over the
// TCP store, on 1 to 4 ranks, checked against what each rank would have generated from a
// seeded RNG; disagreements and dead or late peers must fail on every rank, quickly.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include "common/multiprocess.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using wholememory::bootstrap;
using wholestore_test::before_fork;
using wholestore_test::child_failed;
using wholestore_test::rank_body;

enum class mode { threads, processes };

// The bytes rank `rank` contributes in round `round`: any rank can regenerate any other's.
std::vector<char> payload_of(int rank, int round, std::size_t bytes) {
  std::mt19937_64 rng(0x5eed0000u + 7919u * static_cast<unsigned>(rank) +
                      104729u * static_cast<unsigned>(round));
  std::vector<char> out(bytes);
  for (auto& b : out) b = static_cast<char>(rng() & 0xff);
  return out;
}

// An int that processes forked after its creation share (MAP_SHARED), for ordering checks.
class shared_counter {
 public:
  shared_counter() {
    void* p = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    value_ = new (p) std::atomic<int>(0);
  }
  ~shared_counter() { ::munmap(value_, sizeof(std::atomic<int>)); }
  shared_counter(const shared_counter&) = delete;
  shared_counter& operator=(const shared_counter&) = delete;
  std::atomic<int>& get() { return *value_; }

 private:
  std::atomic<int>* value_ = nullptr;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class BootstrapTest : public ::testing::TestWithParam<std::tuple<mode, int>> {
 protected:
  mode run_mode() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }

  // Runs `body` on every rank; `expected_status` (processes only) is each child's exit status,
  // all 0 when empty.
  void run(const rank_body& body, std::chrono::milliseconds timeout = 30s,
           std::vector<int> expected_status = {}) {
    if (run_mode() == mode::threads) {
      wholestore_test::thread_ranks(ranks(), body, timeout);
      return;
    }
    wholestore_test::fork_result result = wholestore_test::fork_ranks(ranks(), body, timeout);
    if (expected_status.empty()) expected_status.assign(ranks(), 0);
    EXPECT_EQ(result.status, expected_status) << "exit status of each forked rank";
  }
};

TEST_P(BootstrapTest, AllgatherMatchesEveryRanksPayload) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    ASSERT_EQ(bs->size(), n);
    ASSERT_GE(bs->rank(), 0);
    ASSERT_LT(bs->rank(), n);
    // Sizes: empty, one byte, odd, and large enough to need several socket reads.
    int round = 0;
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{4096},
                              std::size_t{300001}}) {
      std::vector<char> mine = payload_of(bs->rank(), round, bytes);
      std::vector<char> all(bytes * n, 'x');
      bs->allgather(mine.data(), all.data(), bytes);
      for (int r = 0; r < n; ++r) {
        std::vector<char> expected = payload_of(r, round, bytes);
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), all.begin() + bytes * r))
            << "slot of rank " << r << " with " << bytes << " bytes";
      }
      ++round;
    }
  });
}

TEST_P(BootstrapTest, AllgathervWithDifferentLengths) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    // Rank 0 sends nothing; the others send lengths that differ from each other.
    auto length_of = [](int r) { return static_cast<std::size_t>(r == 0 ? 0 : 17 * r + 3); };
    std::vector<char> bytes = payload_of(bs->rank(), 1, length_of(bs->rank()));
    std::vector<std::string> all = bs->allgatherv(std::string(bytes.begin(), bytes.end()));
    ASSERT_EQ(static_cast<int>(all.size()), n);
    for (int r = 0; r < n; ++r) {
      std::vector<char> expected = payload_of(r, 1, length_of(r));
      EXPECT_EQ(all[r], std::string(expected.begin(), expected.end())) << "rank " << r;
    }
    // Everybody empty, including embedded zeros elsewhere: lengths must be exact.
    std::vector<std::string> empty = bs->allgatherv("");
    EXPECT_EQ(empty, std::vector<std::string>(n));
    std::string with_zero("a\0b", 3);
    std::vector<std::string> zeros = bs->allgatherv(bs->rank() % 2 ? with_zero : "");
    for (int r = 0; r < n; ++r) EXPECT_EQ(zeros[r], r % 2 ? with_zero : "") << "rank " << r;
  });
}

// agree_on_values: silent when every rank holds the same values; otherwise every rank throws
// mismatch_error naming the first key that differs and which ranks hold which value.
TEST_P(BootstrapTest, AgreeOnValuesNamesTheKeyAndRanks) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    using values = std::vector<std::pair<std::string, std::string>>;
    wholememory::agree_on_values(*bs, "same", values{{"a", "1"}, {"b", "x"}});
    wholememory::agree_on_values(*bs, "none", values{});
    // The last rank differs on "b" (and on "c", which is not reported: "b" comes first).
    const bool odd_one = bs->rank() == n - 1 && n > 1;
    try {
      wholememory::agree_on_values(
          *bs, "job", values{{"a", "1"}, {"b", odd_one ? "y" : "x"}, {"c", odd_one ? "9" : "8"}});
      EXPECT_EQ(n, 1) << "no mismatch reported";
    } catch (const wholememory::mismatch_error& e) {
      const std::string what = e.what();
      std::string others = n == 2 ? "rank 0" : "ranks 0";
      for (int r = 1; r + 1 < n; ++r) others += ", " + std::to_string(r);
      others += " has x";
      EXPECT_NE(what.find("job: the ranks disagree on b: " + others + ", rank " +
                          std::to_string(n - 1) + " has y"),
                std::string::npos)
          << what;
    }
    // A rank that checks another key list is named too.
    try {
      wholememory::agree_on_values(*bs, "keys", odd_one ? values{{"z", "1"}} : values{{"a", "1"}});
      EXPECT_EQ(n, 1) << "no mismatch reported";
    } catch (const wholememory::mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("keys: the ranks check different settings"),
                std::string::npos)
          << e.what();
    }
    // Still in step afterwards.
    bs->barrier();
  });
}

TEST_P(BootstrapTest, BroadcastFromEachRoot) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    for (int root = 0; root < n; ++root) {
      for (std::size_t bytes : {std::size_t{0}, std::size_t{5}, std::size_t{70000}}) {
        std::vector<char> expected = payload_of(root, 100 + root, bytes);
        // Non-roots start with their own bytes, which must all be overwritten.
        std::vector<char> buffer =
            bs->rank() == root ? expected : payload_of(bs->rank(), 999, bytes);
        bs->broadcast(buffer.data(), bytes, root);
        EXPECT_EQ(buffer, expected) << "root " << root << ", " << bytes << " bytes";
      }
    }
  });
}

TEST_P(BootstrapTest, BarrierWaitsForEveryRank) {
  const int n = ranks();
  shared_counter arrived;
  std::atomic<int>* counter = &arrived.get();
  run([n, counter](std::shared_ptr<bootstrap> bs) {
    for (int i = 0; i < 20; ++i) {
      // A late rank makes any barrier that does not wait visible.
      if (bs->rank() == i % n) std::this_thread::sleep_for(2ms);
      counter->fetch_add(1);
      bs->barrier();
      EXPECT_GE(counter->load(), n * (i + 1)) << "barrier " << i << " let a rank through early";
      bs->barrier();
    }
  });
  EXPECT_EQ(arrived.get().load(), 20 * n);
}

TEST_P(BootstrapTest, ManyRoundsInARow) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    const std::int64_t me = bs->rank();
    for (int round = 0; round < 200; ++round) {
      std::int64_t mine[2] = {me, round * 1000 + me};
      std::vector<std::int64_t> all(2 * n);
      bs->allgather(mine, all.data(), sizeof(mine));
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(all[2 * r], r) << "round " << round;
        ASSERT_EQ(all[2 * r + 1], round * 1000 + r) << "round " << round;
      }
      int root = round % n;
      std::int64_t value = me == root ? round * 7 + root : -1;
      bs->broadcast(&value, sizeof(value), root);
      ASSERT_EQ(value, round * 7 + root) << "round " << round;
      if (round % 10 == 0) bs->barrier();
    }
  });
}

// rounds() counts every collective of this bootstrap once (what a step's "no bootstrap round"
// tests and the benchmarks' per-step counts rest on); a split counts its own.
TEST_P(BootstrapTest, RoundsCountEveryCollective) {
  run([](std::shared_ptr<bootstrap> bs) {
    const std::uint64_t start = bs->rounds();
    std::int64_t word = bs->rank();
    std::vector<std::int64_t> all(static_cast<std::size_t>(bs->size()));
    bs->allgather(&word, all.data(), sizeof(word));
    EXPECT_EQ(bs->rounds(), start + 1);
    bs->broadcast(&word, sizeof(word), 0);
    EXPECT_EQ(bs->rounds(), start + 2);
    bs->barrier();
    EXPECT_EQ(bs->rounds(), start + 3);
    for (int i = 0; i < 5; ++i) bs->allgather(&word, all.data(), sizeof(word));
    EXPECT_EQ(bs->rounds(), start + 8);
    std::unique_ptr<bootstrap> half = bs->split(bs->rank() % 2, 0);
    const std::uint64_t after_split = bs->rounds();
    half->barrier();
    EXPECT_EQ(bs->rounds(), after_split) << "the split's rounds are its own";
    EXPECT_GE(half->rounds(), 1u);
  });
}

TEST_P(BootstrapTest, SplitByParity) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    const int me = bs->rank();
    // Key -rank reverses the order inside each group.
    std::unique_ptr<bootstrap> sub = bs->split(me % 2, -me);
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == me % 2) members.push_back(r);
    const int expected_rank =
        static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
    EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
    EXPECT_EQ(sub->rank(), expected_rank);
    EXPECT_EQ(sub->timeout(), bs->timeout());

    std::int32_t old_rank = me;
    std::vector<std::int32_t> gathered(sub->size());
    sub->allgather(&old_rank, gathered.data(), sizeof(old_rank));
    EXPECT_EQ(gathered, std::vector<std::int32_t>(members.begin(), members.end()));
    std::int32_t from_root = sub->rank() == 0 ? 1000 + me : -1;
    sub->broadcast(&from_root, sizeof(from_root), 0);
    EXPECT_EQ(from_root, 1000 + members.front());

    // The parent is still usable, and a rank with a negative color joins no group.
    std::unique_ptr<bootstrap> only_zero = bs->split(me == 0 ? 5 : -1, 0);
    if (me == 0) {
      ASSERT_NE(only_zero, nullptr);
      EXPECT_EQ(only_zero->size(), 1);
      EXPECT_EQ(only_zero->rank(), 0);
      only_zero->barrier();
    } else {
      EXPECT_EQ(only_zero, nullptr);
    }
    // A split of a split.
    std::unique_ptr<bootstrap> nested = sub->split(0, sub->rank());
    ASSERT_NE(nested, nullptr);
    EXPECT_EQ(nested->size(), sub->size());
    EXPECT_EQ(nested->rank(), sub->rank());
    nested->barrier();
    bs->barrier();
  });
}

// Some ranks meet without the others (the seed API's `ranks` lists): the even ranks and the
// odd ranks form their own groups at the same time, twice each, while the parent stays usable.
TEST_P(BootstrapTest, SubsetsMeetWithoutTheOthers) {
  const int n = ranks();
  run([n](std::shared_ptr<bootstrap> bs) {
    const int me = bs->rank();
    std::vector<int> members;
    for (int r = me % 2; r < n; r += 2) members.push_back(r);
    for (int round = 0; round < 2; ++round) {
      std::unique_ptr<bootstrap> sub = bs->subset(members);
      ASSERT_NE(sub, nullptr);
      EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
      EXPECT_EQ(sub->rank(), me / 2);
      std::int32_t mine = 100 * round + me;
      std::vector<std::int32_t> gathered(sub->size());
      sub->allgather(&mine, gathered.data(), sizeof(mine));
      for (std::size_t i = 0; i < members.size(); ++i)
        EXPECT_EQ(gathered[i], 100 * round + members[i]) << "member " << i;
      // A subset of a subset.
      std::unique_ptr<bootstrap> first = sub->rank() == 0 ? sub->subset({0}) : nullptr;
      if (first) first->barrier();
      sub->barrier();
    }
    // Only rank 0: a group of one, with nobody else calling.
    if (me == 0) {
      std::unique_ptr<bootstrap> alone = bs->subset({0});
      EXPECT_EQ(alone->size(), 1);
      alone->barrier();
    }
    EXPECT_THROW(bs->subset({}), wholememory::logic_error);
    EXPECT_THROW(bs->subset({n}), wholememory::logic_error);
    if (n > 1) {
      EXPECT_THROW(bs->subset({(me + 1) % n}), wholememory::logic_error);  // without the caller
      std::vector<int> backwards{n - 1, 0};
      EXPECT_THROW(bs->subset(backwards), wholememory::logic_error);
    }
    bs->barrier();
  });
}

// Failures need a peer: these run on 2 to 4 ranks.
class BootstrapFailureTest : public BootstrapTest {};
// Waits a full timeout, so runs on 3 ranks only.
class BootstrapLateTest : public BootstrapTest {};
// Kills a process: forked ranks only.
class BootstrapKillTest : public BootstrapTest {};

TEST_P(BootstrapFailureTest, MismatchedSizesFailOnEveryRank) {
  const int n = ranks();
  shared_counter caught;
  std::atomic<int>* counter = &caught.get();
  run([counter](std::shared_ptr<bootstrap> bs) {
    const int me = bs->rank();
    std::vector<char> send(16, 1);
    std::vector<char> recv(16 * bs->size());
    try {
      bs->allgather(send.data(), recv.data(), me == 1 ? 16 : 8);
      ADD_FAILURE() << "rank " << me << ": allgather with mismatched sizes did not throw";
    } catch (const wholememory::mismatch_error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("allgather"), std::string::npos) << what;
      EXPECT_NE(what.find("rank 1 passed 16 bytes"), std::string::npos) << what;
      EXPECT_NE(what.find("passed 8 bytes"), std::string::npos) << what;
      counter->fetch_add(1);
    }
    // Different operations, then different broadcast roots.
    try {
      if (me == 0) {
        bs->barrier();
      } else {
        bs->allgather(send.data(), recv.data(), 8);
      }
      ADD_FAILURE() << "rank " << me << ": barrier against allgather did not throw";
    } catch (const wholememory::mismatch_error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("rank 0 called barrier"), std::string::npos) << what;
      counter->fetch_add(1);
    }
    try {
      bs->broadcast(send.data(), 4, me == 0 ? 1 : 0);
      ADD_FAILURE() << "rank " << me << ": broadcast with different roots did not throw";
    } catch (const wholememory::mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 passed root 1"), std::string::npos) << e.what();
      counter->fetch_add(1);
    }
    EXPECT_THROW(bs->broadcast(send.data(), 4, bs->size()), wholememory::mismatch_error);
    // A mismatch leaves the bootstrap usable.
    std::int32_t mine = me * 3;
    std::vector<std::int32_t> all(bs->size());
    bs->allgather(&mine, all.data(), sizeof(mine));
    for (int r = 0; r < bs->size(); ++r) EXPECT_EQ(all[r], r * 3);
  });
  EXPECT_EQ(caught.get().load(), 3 * n) << "every rank must see every mismatch";
}

TEST_P(BootstrapLateTest, LateRankTimesOutOnTheOthers) {
  const std::chrono::milliseconds timeout = 1000ms;
  run(
      [timeout](std::shared_ptr<bootstrap> bs) {
        const int late = bs->size() - 1;
        if (bs->rank() == late) std::this_thread::sleep_for(timeout + 700ms);
        auto start = std::chrono::steady_clock::now();
        std::int32_t mine = 0;
        std::vector<std::int32_t> all(bs->size());
        try {
          bs->allgather(&mine, all.data(), sizeof(mine));
          ADD_FAILURE() << "rank " << bs->rank() << ": allgather without the late rank returned";
        } catch (const wholememory::timeout_error& e) {
          std::string what = e.what();
          // The late rank learns what happened without waiting a timeout of its own.
          double limit = bs->rank() == late ? 1.0 : 1.0 + 2.0;
          EXPECT_LT(seconds_since(start), limit) << what;
          EXPECT_NE(what.find("rank 2 did not arrive"), std::string::npos) << what;
        }
      },
      timeout);
}

// The others must not wait for their timeout when a peer is known to be gone: the callers run
// with a 20 s timeout and allow 3 s, so a regression to waiting out the timeout fails.
constexpr std::chrono::milliseconds gone_peer_timeout = std::chrono::seconds(20);
void expect_fast_timeout(bootstrap& bs, double limit_s) {
  auto start = std::chrono::steady_clock::now();
  std::int32_t mine = 1;
  std::vector<std::int32_t> all(bs.size());
  try {
    bs.allgather(&mine, all.data(), sizeof(mine));
    ADD_FAILURE() << "rank " << bs.rank() << ": allgather without a dead peer returned";
  } catch (const wholememory::timeout_error& e) {
    EXPECT_LT(seconds_since(start), limit_s) << e.what();
  }
}

TEST_P(BootstrapFailureTest, DepartedRankFailsTheOthersFast) {
  const bool threads = run_mode() == mode::threads;
  run(
      [threads](std::shared_ptr<bootstrap> bs) {
        if (bs->rank() == 1) {
          // A thread returns, which destroys its bootstrap; a process leaves without a word.
          if (threads) return;
          std::fflush(stdout);
          ::_exit(0);
        }
        expect_fast_timeout(*bs, 3.0);
      },
      gone_peer_timeout);
}

TEST_P(BootstrapKillTest, KilledRankFailsTheOthersFast) {
  const int n = ranks();
  // Rank 0 hosts the TCP store, so its death is a different path from any other rank's.
  for (int victim : {1, 0}) {
    std::vector<int> status(n, 0);
    status[victim] = 128 + SIGKILL;
    shared_counter started;
    std::atomic<int>* counter = &started.get();
    run(
        [victim, counter](std::shared_ptr<bootstrap> bs) {
          if (bs->rank() == victim) {
            // Die only once the others are past the constructor's rendezvous, whose replies
            // the store on rank 0 may still be sending: this test is about a death between
            // calls.
            auto start = std::chrono::steady_clock::now();
            while (counter->load() < bs->size() - 1 && seconds_since(start) < 10)
              std::this_thread::sleep_for(1ms);
            ::raise(SIGKILL);
          }
          counter->fetch_add(1);
          expect_fast_timeout(*bs, 3.0);
        },
        gone_peer_timeout, status);
  }
}

std::string case_name(const ::testing::TestParamInfo<BootstrapTest::ParamType>& info) {
  return std::string(std::get<0>(info.param) == mode::threads ? "threads" : "processes") + "_" +
         std::to_string(std::get<1>(info.param));
}

const auto both_modes = ::testing::Values(mode::threads, mode::processes);
INSTANTIATE_TEST_SUITE_P(Bootstrap, BootstrapTest,
                         ::testing::Combine(both_modes, ::testing::Range(1, 5)), case_name);
INSTANTIATE_TEST_SUITE_P(Bootstrap, BootstrapFailureTest,
                         ::testing::Combine(both_modes, ::testing::Range(2, 5)), case_name);
INSTANTIATE_TEST_SUITE_P(Bootstrap, BootstrapLateTest,
                         ::testing::Combine(both_modes, ::testing::Values(3)), case_name);
INSTANTIATE_TEST_SUITE_P(Bootstrap, BootstrapKillTest,
                         ::testing::Combine(::testing::Values(mode::processes),
                                            ::testing::Range(2, 5)),
                         case_name);

// ---- the base-class collectives, as a user-supplied bootstrap that only has allgather -------

class allgather_only final : public bootstrap {
 public:
  explicit allgather_only(std::shared_ptr<bootstrap> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }
  void allgather(const void* send, void* recv, std::size_t bytes) override {
    inner_->allgather(send, recv, bytes);
  }
  std::unique_ptr<bootstrap> split(int color, int key) override {
    return inner_->split(color, key);
  }

 private:
  std::shared_ptr<bootstrap> inner_;
};

TEST(BootstrapDefaults, BroadcastAndBarrierOnTopOfAllgather) {
  constexpr int n = 3;
  shared_counter caught;
  std::atomic<int>* counter = &caught.get();
  wholestore_test::thread_ranks(n, [counter](std::shared_ptr<bootstrap> inner) {
    allgather_only bs(inner);
    for (int root = 0; root < n; ++root) {
      std::vector<char> expected = payload_of(root, 7, 33);
      std::vector<char> buffer = bs.rank() == root ? expected : std::vector<char>(33, 0);
      bs.broadcast(buffer.data(), buffer.size(), root);
      EXPECT_EQ(buffer, expected) << "root " << root;
    }
    bs.broadcast(nullptr, 0, 1);
    bs.barrier();
    char byte = 0;
    try {
      bs.broadcast(&byte, 1, bs.rank() == 2 ? 0 : 2);
      ADD_FAILURE() << "different roots did not throw";
    } catch (const wholememory::mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2 passed root 0"), std::string::npos) << e.what();
      counter->fetch_add(1);
    }
    EXPECT_THROW(bs.broadcast(&byte, 1, -1), wholememory::mismatch_error);
    std::vector<std::string> all = bs.allgatherv(std::string(bs.rank(), 'z'));
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], std::string(r, 'z'));
  });
  EXPECT_EQ(caught.get().load(), n);
}

TEST(BootstrapThreads, RejectsBadArguments) {
  EXPECT_THROW(wholememory::make_thread_bootstraps(0, 1s), wholememory::logic_error);
  EXPECT_THROW(wholememory::make_thread_bootstraps(2, 0ms), wholememory::logic_error);
  auto one = wholememory::make_thread_bootstraps(1, 1s);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]->rank(), 0);
  EXPECT_EQ(one[0]->size(), 1);
  EXPECT_EQ(one[0]->timeout(), 1s);
}

// ---- TCP specifics: rendezvous, arguments, environment ------------------------------------

// Forks `n` children running `child(r)`, whose return value is the exit code (an exception
// counts as 1); returns the exit statuses in order.  Children use their own bootstraps.
std::vector<int> fork_children(int n, const std::function<int(int)>& child) {
  before_fork();
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = child(r);
        if (child_failed()) code = 1;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d threw: %s\n", r, e.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> status;
  for (pid_t pid : pids) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    status.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  }
  return status;
}

TEST(BootstrapTcp, RankZeroMayStartLast) {
  const int port = wholestore_test::free_port();
  std::vector<int> status = fork_children(3, [port](int r) {
    if (r == 0) std::this_thread::sleep_for(400ms);
    auto bs = wholememory::make_tcp_bootstrap(r, 3, "127.0.0.1", port, 5s);
    std::int32_t mine = 10 + r;
    std::vector<std::int32_t> all(3);
    bs->allgather(&mine, all.data(), sizeof(mine));
    return all == std::vector<std::int32_t>{10, 11, 12} ? 0 : 1;
  });
  EXPECT_EQ(status, std::vector<int>(3, 0));
}

TEST(BootstrapTcp, ConnectFailures) {
  // Nobody listens: a non-zero rank gives up after its timeout, naming the store.
  const int port = wholestore_test::free_port();
  auto start = std::chrono::steady_clock::now();
  try {
    wholememory::make_tcp_bootstrap(1, 2, "127.0.0.1", port, 500ms);
    ADD_FAILURE() << "connected to nobody";
  } catch (const wholememory::timeout_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_LT(seconds_since(start), 0.5 + 3.0);

  // Rank 2 never comes: the others learn which rank is missing.
  const int port2 = wholestore_test::free_port();
  std::vector<int> status = fork_children(2, [port2](int r) {
    try {
      wholememory::make_tcp_bootstrap(r, 3, "127.0.0.1", port2, 700ms);
    } catch (const wholememory::timeout_error& e) {
      return std::string(e.what()).find("rank 2 did not connect") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));

  // Ranks that disagree on the job size fail on both sides.
  const int port3 = wholestore_test::free_port();
  status = fork_children(2, [port3](int r) {
    try {
      wholememory::make_tcp_bootstrap(r, r == 0 ? 2 : 3, "127.0.0.1", port3, 5s);
    } catch (const wholememory::mismatch_error& e) {
      return std::string(e.what()).find("passed size 3") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));
}

// A job of two ranks on `port` with `token`: forms, tells the parent through `ready`, then
// makes 40 allgathers over about 2 s.  Exits 0 when every result was right.
pid_t start_job(int port, const std::string& token, int rank, int ready) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 1;
  try {
    auto bs = wholememory::make_tcp_bootstrap(rank, 2, "127.0.0.1", port, 10s, token);
    bs->barrier();
    if (rank == 0) {
      const char byte = 1;
      if (::write(ready, &byte, 1) != 1) ::_exit(3);
    }
    code = 0;
    for (int i = 0; i < 40; ++i) {
      std::int32_t mine = 100 * i + rank;
      std::vector<std::int32_t> all(2);
      bs->allgather(&mine, all.data(), sizeof(mine));
      if (all != std::vector<std::int32_t>{100 * i, 100 * i + 1}) code = 2;
      std::this_thread::sleep_for(50ms);
    }
    bs->barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "job rank %d threw: %s\n", rank, e.what());
    code = 1;
  }
  std::fflush(stderr);
  ::_exit(code);
}

// A second job on the port of a running one (the same shape, another shape, no token, even the
// running job's own token for a rank that is taken): each stranger is refused at once with an
// error of its own that says what happened, and the running job never notices.
TEST(BootstrapTcp, StrangersAreRefusedAndTheJobGoesOn) {
  const int port = wholestore_test::free_port();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  std::vector<pid_t> job = {start_job(port, "job-a", 0, ready[1]),
                            start_job(port, "job-a", 1, ready[1])};
  ::close(ready[1]);
  pollfd p{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the job did not form";
  ::close(ready[0]);

  struct stranger {
    int rank, size;
    std::string token;
    const char* expected;
  };
  const std::vector<stranger> strangers = {
      {1, 2, "job-b", "it serves another job (its job token differs)"},
      {1, 2, "", "it serves another job (whose job token this process lacks)"},
      {2, 3, "job-b", "refused this process (rank 2 of 3)"},
      {0, 2, "job-b", "Address already in use"},  // its own store cannot listen
      {1, 2, "job-a", "2 rank(s) have all connected already"},
      {1, 3, "job-a", "have all connected already"},  // another size: refused, not a mismatch
  };
  for (const stranger& s : strangers) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int> status = fork_children(1, [&](int) {
      try {
        wholememory::make_tcp_bootstrap(s.rank, s.size, "127.0.0.1", port, 5s, s.token);
      } catch (const std::exception& e) {
        const std::string what = e.what();
        const bool advised = what.find("WHOLESTORE_MASTER_PORT) of its own") != std::string::npos;
        if (what.find(s.expected) != std::string::npos && advised) return 0;
        std::fprintf(stderr, "stranger got: %s\n", e.what());
        return 2;
      }
      return 1;
    });
    EXPECT_EQ(status, std::vector<int>{0})
        << "rank " << s.rank << " of " << s.size << ", token '" << s.token << "'";
    EXPECT_LT(seconds_since(start), 2.0) << "the stranger waited instead of being refused";
  }
  for (pid_t pid : job) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the running job was disturbed";
  }
}

// While the job forms, a process with another token cannot take a rank's place: it is refused,
// and the rank that belongs there joins afterwards.
TEST(BootstrapTcp, StrangerCannotTakeARankWhileTheJobForms) {
  const int port = wholestore_test::free_port();
  std::vector<int> status = fork_children(3, [port](int child) {
    if (child == 1) {  // the stranger comes first
      std::this_thread::sleep_for(100ms);
      try {
        wholememory::make_tcp_bootstrap(1, 2, "127.0.0.1", port, 5s, "job-b");
      } catch (const wholememory::logic_error& e) {
        return std::string(e.what()).find("another job") != std::string::npos ? 0 : 2;
      }
      return 1;
    }
    const int rank = child == 0 ? 0 : 1;
    if (child == 2) std::this_thread::sleep_for(600ms);
    auto bs = wholememory::make_tcp_bootstrap(rank, 2, "127.0.0.1", port, 5s, "job-a");
    std::int32_t mine = rank;
    std::vector<std::int32_t> all(2);
    bs->allgather(&mine, all.data(), sizeof(mine));
    return all == std::vector<std::int32_t>{0, 1} ? 0 : 3;
  });
  EXPECT_EQ(status, std::vector<int>(3, 0));
}

// Ranks of one job (one token) that disagree while forming are a mismatch on every rank, as
// without tokens; and split() bootstraps inherit the token.
TEST(BootstrapTcp, SameTokenMismatchFailsTheJobAndSplitsInheritTheToken) {
  const int port = wholestore_test::free_port();
  std::vector<int> status = fork_children(2, [port](int r) {
    try {
      wholememory::make_tcp_bootstrap(r, r == 0 ? 2 : 3, "127.0.0.1", port, 5s, "job-a");
    } catch (const wholememory::mismatch_error& e) {
      return std::string(e.what()).find("passed size 3") != std::string::npos ? 0 : 2;
    }
    return 1;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));
  const int port2 = wholestore_test::free_port();
  status = fork_children(2, [port2](int r) {
    auto bs = wholememory::make_tcp_bootstrap(r, 2, "127.0.0.1", port2, 5s, "job-a");
    auto sub = bs->split(0, r);
    std::int32_t mine = r;
    std::vector<std::int32_t> all(2);
    sub->allgather(&mine, all.data(), sizeof(mine));
    return all == std::vector<std::int32_t>{0, 1} ? 0 : 3;
  });
  EXPECT_EQ(status, std::vector<int>(2, 0));
}

TEST(BootstrapTcp, RejectsBadArguments) {
  using wholememory::logic_error;
  using wholememory::make_tcp_bootstrap;
  EXPECT_THROW(make_tcp_bootstrap(0, 0, "127.0.0.1", 1234, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(2, 2, "127.0.0.1", 1234, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(-1, 2, "127.0.0.1", 1234, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(0, 1, "127.0.0.1", 70000, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(1, 2, "127.0.0.1", 0, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(0, 1, "", 1234, 1s), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(0, 1, "127.0.0.1", 1234, 0ms), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(0, 1, "127.0.0.1", 0, 1s, "two words"), logic_error);
  EXPECT_THROW(make_tcp_bootstrap(0, 1, "127.0.0.1", 0, 1s, std::string(129, 'x')), logic_error);
  // Port 0 on rank 0 picks a free port; a one-rank job needs nobody else.
  auto alone = make_tcp_bootstrap(0, 1, "127.0.0.1", 0, 1s);
  std::uint64_t value = 0x1234567890abcdefULL;
  std::uint64_t out = 0;
  alone->allgather(&value, &out, sizeof(value));
  EXPECT_EQ(out, value);
}

// ---- environment ---------------------------------------------------------------------------

// Sets environment variables for one test and restores the previous values afterwards.
class env_guard {
 public:
  env_guard() {
    for (const char* name : names_) {
      const char* value = std::getenv(name);
      if (value) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  ~env_guard() {
    for (const char* name : names_) {
      auto it = saved_.find(name);
      if (it == saved_.end()) {
        ::unsetenv(name);
      } else {
        ::setenv(name, it->second.c_str(), 1);
      }
    }
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;
  void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }
  void unset(const char* name) { ::unsetenv(name); }

 private:
  static constexpr const char* names_[] = {"RANK",
                                           "WORLD_SIZE",
                                           "LOCAL_RANK",
                                           "LOCAL_WORLD_SIZE",
                                           "MASTER_ADDR",
                                           "MASTER_PORT",
                                           "OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "WHOLESTORE_TIMEOUT",
                                           "WHOLESTORE_JOB_TOKEN",
                                           "TORCHELASTIC_RUN_ID",
                                           "PMIX_NAMESPACE",
                                           "OMPI_MCA_ess_base_jobid",
                                           "WHOLESTORE_MASTER_PORT",
                                           "TORCHELASTIC_USE_AGENT_STORE"};
  std::map<std::string, std::string> saved_;
};

TEST(BootstrapEnv, NoLaunchEnvironment) {
  env_guard env;
  EXPECT_FALSE(wholememory::read_launch_env().has_value());
  EXPECT_THROW(wholememory::bootstrap_from_env(1s), wholememory::logic_error);
}

TEST(BootstrapEnv, TorchrunVariables) {
  env_guard env;
  env.set("RANK", "5");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_RANK", "1");
  env.set("LOCAL_WORLD_SIZE", "4");
  env.set("MASTER_ADDR", "node-a.example");
  env.set("MASTER_PORT", "12345");
  // torchrun's variables win over mpirun's when both are present.
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  auto le = wholememory::read_launch_env();
  ASSERT_TRUE(le.has_value());
  EXPECT_EQ(le->rank, 5);
  EXPECT_EQ(le->size, 8);
  EXPECT_EQ(le->local_rank, 1);
  EXPECT_EQ(le->local_size, 4);
  EXPECT_EQ(le->master_addr, "node-a.example");
  EXPECT_EQ(le->master_port, 12345);
}

TEST(BootstrapEnv, TorchrunWithoutLocalOrMasterVariables) {
  env_guard env;
  env.set("RANK", "2");
  env.set("WORLD_SIZE", "3");
  auto le = wholememory::read_launch_env();
  ASSERT_TRUE(le.has_value());
  EXPECT_EQ(le->rank, 2);
  EXPECT_EQ(le->size, 3);
  EXPECT_EQ(le->local_rank, 2);  // one host assumed
  EXPECT_EQ(le->local_size, 3);
  EXPECT_EQ(le->master_addr, "127.0.0.1");
  EXPECT_EQ(le->master_port, 29500);
}

// The seed API's WmmpInit takes rank and size from its caller and only the meeting point
// from the environment.
TEST(BootstrapEnv, MasterAddressWithoutRankVariables) {
  env_guard env;
  EXPECT_EQ(wholememory::master_address_from_env(),
            std::make_pair(std::string("127.0.0.1"), 29500));
  env.set("MASTER_ADDR", "node7");
  env.set("MASTER_PORT", "31337");
  EXPECT_FALSE(wholememory::read_launch_env().has_value());
  EXPECT_EQ(wholememory::master_address_from_env(), std::make_pair(std::string("node7"), 31337));
  env.set("MASTER_PORT", "70000");
  EXPECT_THROW(wholememory::master_address_from_env(), wholememory::logic_error);
  env.set("MASTER_PORT", "80");
  env.set("MASTER_ADDR", "");
  EXPECT_THROW(wholememory::master_address_from_env(), wholememory::logic_error);
}

// Under torchrun the agent's store holds MASTER_PORT (torch.distributed meets there), so
// wholestore's store takes the next port; WHOLESTORE_MASTER_PORT overrides both.
TEST(BootstrapEnv, PortBesideTorchrunsAgentStore) {
  env_guard env;
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "2");
  env.set("MASTER_PORT", "29400");
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  EXPECT_EQ(wholememory::read_launch_env()->master_port, 29401);
  env.set("TORCHELASTIC_USE_AGENT_STORE", "False");
  EXPECT_EQ(wholememory::read_launch_env()->master_port, 29400);
  env.set("TORCHELASTIC_USE_AGENT_STORE", "True");
  env.set("WHOLESTORE_MASTER_PORT", "31000");
  EXPECT_EQ(wholememory::read_launch_env()->master_port, 31000);
  env.set("WHOLESTORE_MASTER_PORT", "0");
  EXPECT_THROW(wholememory::read_launch_env(), wholememory::logic_error);
  env.unset("WHOLESTORE_MASTER_PORT");
  env.set("MASTER_PORT", "65535");
  try {
    wholememory::read_launch_env();
    ADD_FAILURE() << "MASTER_PORT 65535 under torchrun's agent store was accepted";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("WHOLESTORE_MASTER_PORT"), std::string::npos) << e.what();
  }
}

TEST(BootstrapEnv, OpenMpiVariables) {
  env_guard env;
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  auto le = wholememory::read_launch_env();
  ASSERT_TRUE(le.has_value());
  EXPECT_EQ(le->rank, 3);
  EXPECT_EQ(le->size, 4);
  EXPECT_EQ(le->local_rank, 1);
  EXPECT_EQ(le->local_size, 2);
  EXPECT_EQ(le->master_addr, "127.0.0.1");
  EXPECT_EQ(le->master_port, 29500);
  env.set("MASTER_ADDR", "10.1.2.3");
  env.set("MASTER_PORT", "4000");
  le = wholememory::read_launch_env();
  ASSERT_TRUE(le.has_value());
  EXPECT_EQ(le->master_addr, "10.1.2.3");
  EXPECT_EQ(le->master_port, 4000);
}

TEST(BootstrapEnv, BootstrapFromEnvironment) {
  const int port = wholestore_test::free_port();
  std::vector<int> status = fork_children(3, [port](int r) {
    ::setenv("RANK", std::to_string(r).c_str(), 1);
    ::setenv("WORLD_SIZE", "3", 1);
    ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", "3", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    auto bs = wholememory::bootstrap_from_env(5s);
    if (bs->rank() != r || bs->size() != 3 || bs->timeout() != 5s) return 2;
    std::vector<std::string> all = bs->allgatherv(std::string(r + 1, char('a' + r)));
    return all == std::vector<std::string>{"a", "bb", "ccc"} ? 0 : 3;
  });
  EXPECT_EQ(status, std::vector<int>(3, 0));
}

// Run by tests/apps/launch_test.sh as `wholestore launch -n 3 -- wholememory_tests
// --gtest_filter=BootstrapLaunched.*`: the launcher's environment must lead to a working job.
TEST(BootstrapLaunched, AllgatherAcrossLaunchedRanks) {
  if (std::getenv("RANK") == nullptr) GTEST_SKIP() << "runs under `wholestore launch` only";
  auto bs = wholememory::bootstrap_from_env(20s);
  auto env = wholememory::read_launch_env();
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(bs->rank(), env->rank);
  EXPECT_EQ(bs->size(), env->size);
  EXPECT_EQ(env->local_size, env->size);
  std::vector<std::string> all = bs->allgatherv("rank " + std::to_string(bs->rank()));
  for (int r = 0; r < bs->size(); ++r) EXPECT_EQ(all[r], "rank " + std::to_string(r));
  bs->barrier();
}

TEST(BootstrapEnv, MalformedValuesThrowNamingTheVariable) {
  struct bad_case {
    std::vector<std::pair<const char*, const char*>> vars;
    const char* named;
  };
  const std::vector<bad_case> cases = {
      {{{"RANK", "abc"}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "1x"}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", ""}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999999999999"}}, "WORLD_SIZE"},
      {{{"RANK", "0"}}, "WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}}, "RANK"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
       "LOCAL_RANK"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "port"}}, "MASTER_PORT"},
      {{{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_RANK"},
  };
  for (const bad_case& c : cases) {
    env_guard env;
    std::string described;
    for (const auto& [name, value] : c.vars) {
      env.set(name, value);
      described += std::string(name) + "='" + value + "' ";
    }
    try {
      wholememory::read_launch_env();
      ADD_FAILURE() << "no error for " << described;
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos)
          << described << "-> " << e.what();
    }
  }
}

TEST(BootstrapEnv, JobToken) {
  env_guard env;
  EXPECT_EQ(wholememory::job_token_from_env(), "");
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "1");
  env.set("WHOLESTORE_JOB_TOKEN", "0123abcd-job.7");
  EXPECT_EQ(wholememory::job_token_from_env(), "0123abcd-job.7");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "0123abcd-job.7");
  for (const std::string& bad : {std::string(), std::string("a b"), std::string("tab\there"),
                                 std::string(129, 'x'), std::string("caf\xc3\xa9")}) {
    env.set("WHOLESTORE_JOB_TOKEN", bad);
    try {
      wholememory::job_token_from_env();
      ADD_FAILURE() << "no error for WHOLESTORE_JOB_TOKEN='" << bad << "'";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("WHOLESTORE_JOB_TOKEN"), std::string::npos) << e.what();
    }
  }
}

// Without WHOLESTORE_JOB_TOKEN, torchrun's and mpirun's own job ids become the token, the same
// on every rank of a job and different between jobs; an explicit token wins.
TEST(BootstrapEnv, JobTokenFromTheLauncher) {
  env_guard env;  // every variable below starts unset
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "");  // a torch environment, no id
  env.set("TORCHELASTIC_RUN_ID", "none");                    // torchrun's default: no id
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "");
  env.set("TORCHELASTIC_RUN_ID", "5d9c2c1e-job");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "torchrun-5d9c2c1e-job");
  env.set("TORCHELASTIC_RUN_ID", "a b\tc");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "torchrun-a_b_c");
  env.set("TORCHELASTIC_RUN_ID", std::string(300, 'r'));
  const std::string hashed = wholememory::read_launch_env()->job_token;
  EXPECT_EQ(hashed.size(), std::string("torchrun-").size() + 16) << hashed;
  env.set("TORCHELASTIC_RUN_ID", std::string(299, 'r') + "s");
  EXPECT_NE(wholememory::read_launch_env()->job_token, hashed);  // another long id, another token
  env.set("WHOLESTORE_JOB_TOKEN", "explicit");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "explicit");
  env.unset("WHOLESTORE_JOB_TOKEN");

  env.unset("RANK");
  env.unset("WORLD_SIZE");
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "");  // TORCHELASTIC_RUN_ID is torch's
  env.set("OMPI_MCA_ess_base_jobid", "1234567");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "mpirun-1234567");
  env.set("PMIX_NAMESPACE", "prterun-node7-4242@1");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "mpirun-prterun-node7-4242@1");
  // Two jobs' tokens differ, so a store refuses the other job's processes (BootstrapTcp tests).
  env.set("PMIX_NAMESPACE", "prterun-node7-4243@1");
  EXPECT_EQ(wholememory::read_launch_env()->job_token, "mpirun-prterun-node7-4243@1");
}

TEST(BootstrapEnv, DefaultTimeout) {
  env_guard env;
  EXPECT_EQ(wholememory::default_timeout(), 300s);
  env.set("WHOLESTORE_TIMEOUT", "2.5");
  EXPECT_EQ(wholememory::default_timeout(), 2500ms);
  env.set("WHOLESTORE_TIMEOUT", "42");
  EXPECT_EQ(wholememory::default_timeout(), 42s);
  env.set("WHOLESTORE_TIMEOUT", "0.0001");  // rounds up, never to zero
  EXPECT_EQ(wholememory::default_timeout(), 1ms);
  for (const char* bad : {"", "abc", "5s", "-1", "0", "inf", "nan", "1e300"}) {
    env.set("WHOLESTORE_TIMEOUT", bad);
    try {
      wholememory::default_timeout();
      ADD_FAILURE() << "no error for WHOLESTORE_TIMEOUT='" << bad << "'";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("WHOLESTORE_TIMEOUT"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("(0, 31536000]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
