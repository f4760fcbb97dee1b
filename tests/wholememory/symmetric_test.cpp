// Symmetric memory on the host backend (forked ranks, shared host memory): every rank reads
// and writes every rank's block through the accessor; uneven sizes fail on every rank unless
// make_symmetric; bad arguments name the rank; a free on one rank only ends in an error within
// the timeout, not a hang; allocations in a loop give their memory back.
#include "common/multiprocess.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/symmetric.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

namespace wholestore_test {
namespace {

using wholememory::memory_location;
using wholememory::symmetric_memory;

std::uint64_t value_of(int rank, std::size_t i) {
  return (static_cast<std::uint64_t>(rank) << 40) ^ (i * 0x9e3779b97f4a7c15ull);
}

void expect_all_ok(const fork_result& r) {
  for (std::size_t i = 0; i < r.status.size(); ++i)
    EXPECT_EQ(r.status[i], 0) << "rank " << i << " failed";
}

TEST(SymmetricMemory, EveryRankReadsAndWritesEveryBlock) {
  for (int ranks : {1, 2, 3}) {
    expect_all_ok(fork_ranks(ranks, [](std::shared_ptr<wholememory::bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      const int n = comm->size(), me = comm->rank();
      constexpr std::size_t count = 5000;  // not a multiple of any page or granularity
      symmetric_memory heap =
          symmetric_memory::allocate(comm, count * 8, memory_location::host, false);
      ASSERT_EQ(heap.ranks(), n);
      ASSERT_EQ(heap.block_bytes(), count * 8);
      const auto at = heap.accessor<std::uint64_t>();
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(static_cast<void*>(at.block(r)), heap.block(r));
        EXPECT_EQ(heap.requested_bytes(r), count * 8);
      }
      for (std::size_t i = 0; i < count; ++i) *at(me, i) = value_of(me, i);
      bs->barrier();
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(*at(r, i), value_of(r, i)) << "rank " << r << " element " << i;
      bs->barrier();
      // Each rank overwrites the odd elements of the next rank's block.
      const int next = (me + 1) % n, prev = (me + n - 1) % n;
      for (std::size_t i = 1; i < count; i += 2) *at(next, i) = value_of(100 + me, i);
      bs->barrier();
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t want = i % 2 ? value_of(100 + prev, i) : value_of(me, i);
        ASSERT_EQ(*at(me, i), want) << "element " << i;
      }
      heap.free();
      EXPECT_FALSE(static_cast<bool>(heap));
    }));
  }
}

TEST(SymmetricMemory, UnevenSizesFailOnEveryRankUnlessMadeSymmetric) {
  expect_all_ok(fork_ranks(3, [](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    const int me = comm->rank();
    const std::size_t mine = 100 * static_cast<std::size_t>(me + 1);
    try {
      symmetric_memory::allocate(comm, mine, memory_location::host, false);
      ADD_FAILURE() << "uneven sizes were accepted";
    } catch (const wholememory::mismatch_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 0: 100, rank 1: 200, rank 2: 300"), std::string::npos) << what;
      EXPECT_NE(what.find("make_symmetric"), std::string::npos) << what;
    }
    symmetric_memory heap = symmetric_memory::allocate(comm, mine, memory_location::host, true);
    EXPECT_EQ(heap.block_bytes(), 300u);
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(heap.requested_bytes(r), 100u * static_cast<std::size_t>(r + 1));
    // Every block holds the largest size: the last byte of each is usable by everyone.
    auto* own = static_cast<unsigned char*>(heap.local_block());
    own[299] = static_cast<unsigned char>(7 + me);
    bs->barrier();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(static_cast<unsigned char*>(heap.block(r))[299], 7 + r);
    heap.free();
  }));
}

TEST(SymmetricMemory, ZeroBytesAndDisagreeingFlagsFailOnEveryRank) {
  expect_all_ok(fork_ranks(2, [](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    const int me = comm->rank();
    try {
      symmetric_memory::allocate(comm, me == 1 ? 0 : 64, memory_location::host, true);
      ADD_FAILURE() << "a zero-byte block was accepted";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 asked for 0 bytes"), std::string::npos)
          << e.what();
    }
    try {
      symmetric_memory::allocate(comm, 64, memory_location::host, me == 0);
      ADD_FAILURE() << "disagreeing make_symmetric was accepted";
    } catch (const wholememory::mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0: true, rank 1: false"), std::string::npos)
          << e.what();
    }
    // The job is still usable after both errors.
    symmetric_memory heap = symmetric_memory::allocate(comm, 64, memory_location::host);
    EXPECT_EQ(heap.block_bytes(), 64u);
    heap.free();
  }));
}

TEST(SymmetricMemory, AFreeOnOneRankOnlyFailsWithinTheTimeoutInsteadOfHanging) {
  const auto timeout = std::chrono::seconds(2);
  fork_result r = fork_ranks(
      2,
      [](std::shared_ptr<wholememory::bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        symmetric_memory heap = symmetric_memory::allocate(comm, 4096, memory_location::host);
        if (comm->rank() == 0) {
          const auto start = std::chrono::steady_clock::now();
          try {
            heap.free();
            ADD_FAILURE() << "free returned while rank 1 never freed";
          } catch (const std::exception& e) {
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            EXPECT_LT(s, 20.0) << "free waited " << s << " s: " << e.what();
            EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
          }
        } else {
          // Rank 1 goes on without freeing, past rank 0's timeout; its handle is released
          // when the process ends.
          std::this_thread::sleep_for(std::chrono::seconds(5));
        }
      },
      timeout);
  EXPECT_EQ(r.status[0], 0) << "rank 0 failed";
}

/// Lines of /proc/self/maps: every shared segment is one mapping.
std::size_t mapping_count() {
  std::ifstream maps("/proc/self/maps");
  std::size_t lines = 0;
  for (std::string line; std::getline(maps, line);) ++lines;
  return lines;
}

TEST(SymmetricMemory, AllocationsInALoopGiveTheirMemoryBack) {
  expect_all_ok(fork_ranks(2, [](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    {  // one round first, so that lazily made structures exist before counting
      symmetric_memory warm = symmetric_memory::allocate(comm, 1 << 20, memory_location::host);
      warm.free();
    }
    const std::size_t before = mapping_count();
    for (int i = 0; i < 40; ++i) {
      symmetric_memory heap = symmetric_memory::allocate(
          comm, (1u << 20) + static_cast<std::size_t>(i) * 4096, memory_location::host);
      static_cast<char*>(heap.local_block())[0] = 1;
      heap.free();
    }
    // A leak keeps at least one mapping a round (40); the process's allocator maps a few of its
    // own now and then (ASan's: 2 more in one run), which is not ours to count.
    EXPECT_LT(mapping_count(), before + 20) << "mappings grew over 40 allocate/free rounds";
  }));
}

}  // namespace
}  // namespace wholestore_test
