/*
 * WholeMemory on GPUs through the public API: every type x location, one process, two processes
 * (host and NCCL communicators), two threads, one process over two GPUs.  Each rank writes the
 * pattern over its own part with a kernel through PtrGen, the ranks meet, and each rank checks
 * every element of the allocation with a kernel through PtrGen (so reads cross NVLink to the
 * peer GPU, or go to registered host memory); host memory is also checked by the CPU.
 *
 * The test process never calls CUDA itself (see gpu_test_util.hpp): every body runs in forked
 * ranks.  WHOLESTORE_BIG_TEST_GIB=<GiB> runs the big continuous allocation test.
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"
#include "wholememory/gpu/ptr_gen_kernels.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

using wholememory::allocation_options;
using wholememory::bootstrap;
using wholememory::chunked_view;
using wholememory::communicator;
using wholememory::memory_location;
using wholememory::memory_type;
using wholememory::part_info;
using wm_handle = wholememory::allocation;

constexpr std::size_t MiB = std::size_t(1) << 20;
constexpr std::size_t GiB = std::size_t(1) << 30;
constexpr std::size_t element_bytes = sizeof(std::int64_t);

/// One allocation shape.  Every total and part boundary is a multiple of 8 bytes, so the
/// pattern's int64 elements never straddle parts.
struct size_case {
  std::string name;
  std::size_t total_bytes;
  std::size_t granularity;
  std::vector<std::size_t> part_bytes;  // empty: the even split
};

std::vector<size_case> size_cases(int parts) {
  std::vector<size_case> cases;
  // Parts do not end at 2 MiB boundaries: the end of a part sits on the next GPU.
  cases.push_back({"uneven", 3 * 2 * MiB + 12345 * element_bytes, element_bytes, {}});
  // A 296-byte row (37 int64): boundaries at multiples of 296, the remainder to the last part.
  cases.push_back({"granularity_296", 1000003 * element_bytes, 296, {}});
  std::vector<std::size_t> given;
  std::size_t given_total = 0;
  for (int p = 0; p < parts; ++p) {
    given.push_back((5 - p % 3) * MiB + element_bytes * (7 + 4 * p));
    given_total += given.back();
  }
  cases.push_back({"caller_part_bytes", given_total, element_bytes, given});
  cases.push_back({"zero_bytes", 0, element_bytes, {}});
  if (parts > 1) {
    std::vector<std::size_t> first_empty(parts, 2 * MiB + 24);
    first_empty[0] = 0;
    cases.push_back({"first_part_empty", (parts - 1) * (2 * MiB + 24), element_bytes, first_empty});
    std::vector<std::size_t> last_empty(parts, 3 * MiB + 40);
    last_empty[parts - 1] = 0;
    cases.push_back({"last_part_empty", (parts - 1) * (3 * MiB + 40), element_bytes, last_empty});
  }
  return cases;
}

enum class comm_kind { host, nccl };

std::shared_ptr<communicator> make_comm(std::shared_ptr<bootstrap> bs, comm_kind kind, int device) {
  if (kind == comm_kind::nccl) return wholememory::make_nccl_communicator(std::move(bs), device);
  return wholememory::make_host_communicator(std::move(bs));
}

/// Finishes this rank's work on `stream`, then waits for every rank.
void rank_barrier(communicator& comm, cudaStream_t stream) {
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  comm.barrier(stream);
  comm.synchronize(stream);
}

int device_count_here() {
  int count = 0;
  WM_CUDA_TRY(cudaGetDeviceCount(&count));
  return count;
}

/// Counts, on `device`, the elements of [begin, end) that differ from the pattern, reading
/// through PtrGen: data() for continuous memory, device_view(device) for chunked memory.
unsigned long long device_mismatches(const wm_handle& wm, int device, std::int64_t begin,
                                     std::int64_t end, std::uint64_t salt,
                                     const device_buffer& counter, cudaStream_t stream) {
  auto* count = counter.as<unsigned long long>();
  WM_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream));
  if (wm.type() == memory_type::continuous) {
    count_mismatches(wm.data(), begin, end, 0, salt, count, stream);
  } else {
    count_mismatches(wm.device_view(device), begin, end, 0, salt, count, stream);
  }
  unsigned long long result = 0;
  WM_CUDA_TRY(cudaMemcpyAsync(&result, count, sizeof(result), cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return result;
}

/// The same on the CPU through host PtrGen (host memory).
unsigned long long host_mismatches(const wm_handle& wm, std::int64_t begin, std::int64_t end,
                                   std::uint64_t salt) {
  unsigned long long mismatches = 0;
  if (wm.type() == memory_type::continuous) {
    wholememory::PtrGen<std::int64_t, std::int64_t> gen(wm.data());
    for (std::int64_t i = begin; i < end; ++i) mismatches += *gen.At(i) != pattern_value(i, salt);
  } else {
    chunked_view view = wm.host_view();
    wholememory::PtrGen<const chunked_view, std::int64_t> gen(&view);
    for (std::int64_t i = begin; i < end; ++i) mismatches += *gen.At(i) != pattern_value(i, salt);
  }
  return mismatches;
}

/// Checks the partition of `wm` against the case and what this process maps.
void check_parts(const wm_handle& wm, const size_case& c, int my_rank, int my_device) {
  const int n = wm.num_parts();
  std::size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const part_info p = wm.part(i);
    EXPECT_EQ(p.offset, offset) << "part " << i;
    EXPECT_EQ(p.rank, i) << "part " << i;
    if (i + 1 < n) {
      EXPECT_EQ(p.bytes % c.granularity, 0u) << "part " << i;
    }
    if (!c.part_bytes.empty()) {
      EXPECT_EQ(p.bytes, c.part_bytes[i]) << "part " << i;
    }
    const bool mapped_here = wm.type() != memory_type::distributed || i == my_rank;
    if (p.bytes > 0 && mapped_here) {
      EXPECT_NE(p.ptr, nullptr) << "part " << i;
    }
    if (wm.type() == memory_type::distributed && i != my_rank) {
      EXPECT_EQ(p.ptr, nullptr) << "distributed part " << i << " is mapped on rank " << my_rank;
    }
    if (wm.location() == memory_location::host) {
      EXPECT_EQ(p.device, -1) << "part " << i;
    }
    if (wm.location() == memory_location::device && i == my_rank) {
      EXPECT_EQ(p.device, my_device) << "part " << i;
    }
    offset += p.bytes;
  }
  EXPECT_EQ(offset, c.total_bytes);
}

/// One rank's side of one case: allocate, write the own part, meet, check everything, free.
void check_case(const std::shared_ptr<communicator>& comm, memory_type type,
                memory_location location, const size_case& c, int device, std::uint64_t salt) {
  SCOPED_TRACE("case " + c.name + ", rank " + std::to_string(comm->rank()));
  cuda_stream stream;
  device_buffer counter(sizeof(unsigned long long), device);

  allocation_options options;
  options.granularity = c.granularity;
  options.part_bytes = c.part_bytes;
  wm_handle wm = wm_handle::create(comm, c.total_bytes, type, location, options);
  ASSERT_EQ(wm.size(), c.total_bytes);
  ASSERT_EQ(wm.num_parts(), comm->size());
  check_parts(wm, c, comm->rank(), device);

  const part_info mine = wm.local_part();
  ASSERT_EQ(mine.offset % element_bytes, 0u);
  ASSERT_EQ(mine.bytes % element_bytes, 0u);
  const std::int64_t first = static_cast<std::int64_t>(mine.offset / element_bytes);
  const std::int64_t last = static_cast<std::int64_t>((mine.offset + mine.bytes) / element_bytes);
  const std::int64_t total = static_cast<std::int64_t>(c.total_bytes / element_bytes);

  switch (type) {
    case memory_type::continuous:
      write_pattern(wm.data(), first, last, 0, salt, stream.get());
      break;
    case memory_type::chunked:
      write_pattern(wm.device_view(device), first, last, 0, salt, stream.get());
      break;
    case memory_type::distributed:
      write_pattern(mine.ptr, 0, last - first, first, salt, stream.get());
      break;
  }
  rank_barrier(*comm, stream.get());

  if (type == memory_type::distributed) {
    auto* count = counter.as<unsigned long long>();
    WM_CUDA_TRY(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream.get()));
    count_mismatches(mine.ptr, 0, last - first, first, salt, count, stream.get());
    unsigned long long mismatches = 0;
    WM_CUDA_TRY(cudaMemcpyAsync(&mismatches, count, sizeof(mismatches), cudaMemcpyDeviceToHost,
                                stream.get()));
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    EXPECT_EQ(mismatches, 0u) << "own part, read on device " << device;
    if (location == memory_location::host) {
      wholememory::PtrGen<std::int64_t, std::int64_t> gen(mine.ptr);
      unsigned long long on_host = 0;
      for (std::int64_t i = 0; i < last - first; ++i) {
        on_host += *gen.At(i) != pattern_value(first + i, salt);
      }
      EXPECT_EQ(on_host, 0u) << "own part, read by the CPU";
    }
  } else {
    EXPECT_EQ(device_mismatches(wm, device, 0, total, salt, counter, stream.get()), 0u)
        << "whole allocation of " << total << " elements, read on device " << device;
    if (location == memory_location::host) {
      EXPECT_EQ(host_mismatches(wm, 0, total, salt), 0u) << "whole allocation, read by the CPU";
    }
  }
  rank_barrier(*comm, stream.get());
  wm.free();
}

/// Runs every size case as one rank on GPU rank % (the first `gpus` devices; 0: all visible).
void run_cases(std::shared_ptr<bootstrap> bs, comm_kind kind, memory_type type,
               memory_location location, int gpus = 0) {
  const int device = bs->rank() % (gpus > 0 ? gpus : device_count_here());
  WM_CUDA_TRY(cudaSetDevice(device));
  std::shared_ptr<communicator> comm = make_comm(std::move(bs), kind, device);
  std::uint64_t salt = 0x5bd1e9955bd1e995ull;
  for (const size_case& c : size_cases(comm->size())) {
    check_case(comm, type, location, c, device, salt++);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

struct type_location {
  memory_type type;
  memory_location location;
};

// Names the parameter in test listings (ctest shows it).
void PrintTo(const type_location& p, std::ostream* os) {
  *os << wholememory::memory_type_name(p.type) << " "
      << wholememory::memory_location_name(p.location);
}

std::vector<type_location> all_types_and_locations() {
  std::vector<type_location> all;
  for (memory_type t : {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
    for (memory_location l : {memory_location::device, memory_location::host})
      all.push_back({t, l});
  }
  return all;
}

class DeviceMemoryTest : public ::testing::TestWithParam<type_location> {
 protected:
  memory_type type() const { return GetParam().type; }
  memory_location location() const { return GetParam().location; }
};

TEST_P(DeviceMemoryTest, OneProcessOneGpu) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const memory_type t = type();
  const memory_location l = location();
  fork_result result =
      fork_ranks(1, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::host, t, l); });
  EXPECT_TRUE(result.all_ok()) << "the rank failed (status " << result.status[0] << ")";
}

TEST_P(DeviceMemoryTest, TwoProcessesHostCommunicator) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const memory_type t = type();
  const memory_location l = location();
  fork_result result =
      fork_ranks(2, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::host, t, l); });
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

TEST_P(DeviceMemoryTest, TwoProcessesNcclCommunicator) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const memory_type t = type();
  const memory_location l = location();
  fork_result result =
      fork_ranks(2, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::nccl, t, l); });
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

TEST_P(DeviceMemoryTest, TwoThreads) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const memory_type t = type();
  const memory_location l = location();
  // The threads run in a forked child, so that this process never initializes CUDA.
  fork_result result = fork_ranks(1, [&](std::shared_ptr<bootstrap>) {
    thread_ranks(2, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::host, t, l); });
  });
  EXPECT_TRUE(result.all_ok()) << "the process running the threads failed (status "
                               << result.status[0] << ")";
}

// Several ranks per GPU (a 2-rank job on a 1-GPU machine, more processes than GPUs): every
// type x location over the host communicator, 2, 3 and 4 ranks on GPU 0.
TEST_P(DeviceMemoryTest, RanksSharingOneGpu) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const memory_type t = type();
  const memory_location l = location();
  for (int ranks : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks on GPU 0");
    fork_result result = fork_ranks(
        ranks, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::host, t, l, 1); });
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
  }
}

// Three ranks on two GPUs: ranks 0 and 2 share GPU 0.
TEST_P(DeviceMemoryTest, ThreeRanksOnTwoGpus) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const memory_type t = type();
  const memory_location l = location();
  fork_result result = fork_ranks(
      3, [&](std::shared_ptr<bootstrap> bs) { run_cases(bs, comm_kind::host, t, l, 2); });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

std::string type_location_name(const ::testing::TestParamInfo<type_location>& info) {
  return std::string(wholememory::memory_type_name(info.param.type)) + "_" +
         wholememory::memory_location_name(info.param.location);
}

INSTANTIATE_TEST_SUITE_P(TypesAndLocations, DeviceMemoryTest,
                         ::testing::ValuesIn(all_types_and_locations()), type_location_name);

/// One process, parts on GPUs 0 and 1 (options.devices): write each part from its GPU, check
/// everything from both.
void run_single_process_two_gpus(std::shared_ptr<bootstrap> bs, memory_type type) {
  const std::vector<int> devices = {0, 1};
  WM_CUDA_TRY(cudaSetDevice(0));
  std::shared_ptr<communicator> comm = wholememory::make_host_communicator(std::move(bs));
  std::uint64_t salt = 0x27d4eb2f165667c5ull;
  for (const size_case& c : size_cases(static_cast<int>(devices.size()))) {
    SCOPED_TRACE("case " + c.name);
    allocation_options options;
    options.granularity = c.granularity;
    options.part_bytes = c.part_bytes;
    options.devices = devices;
    wm_handle wm = wm_handle::create(comm, c.total_bytes, type, memory_location::device, options);
    ASSERT_EQ(wm.num_parts(), 2);
    ASSERT_EQ(wm.size(), c.total_bytes);
    EXPECT_THROW(wm.local_part(), wholememory::logic_error);
    std::size_t offset = 0;
    for (int i = 0; i < 2; ++i) {
      const part_info p = wm.part(i);
      EXPECT_EQ(p.offset, offset);
      EXPECT_EQ(p.device, devices[i]);
      if (!c.part_bytes.empty()) {
        EXPECT_EQ(p.bytes, c.part_bytes[i]);
      }
      if (p.bytes > 0) {
        EXPECT_NE(p.ptr, nullptr);
      }
      offset += p.bytes;
    }
    EXPECT_EQ(offset, c.total_bytes);

    for (int i = 0; i < 2; ++i) {
      const part_info p = wm.part(i);
      WM_CUDA_TRY(cudaSetDevice(devices[i]));
      cuda_stream stream;
      const auto first = static_cast<std::int64_t>(p.offset / element_bytes);
      const auto last = static_cast<std::int64_t>((p.offset + p.bytes) / element_bytes);
      if (type == memory_type::continuous) {
        write_pattern(wm.data(), first, last, 0, salt, stream.get());
      } else {
        write_pattern(wm.device_view(devices[i]), first, last, 0, salt, stream.get());
      }
      WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    }
    const auto total = static_cast<std::int64_t>(c.total_bytes / element_bytes);
    for (int device : devices) {
      WM_CUDA_TRY(cudaSetDevice(device));
      cuda_stream stream;
      device_buffer counter(sizeof(unsigned long long), device);
      EXPECT_EQ(device_mismatches(wm, device, 0, total, salt, counter, stream.get()), 0u)
          << "read on device " << device;
    }
    WM_CUDA_TRY(cudaSetDevice(0));
    wm.free();
    ++salt;
  }
}

TEST(DeviceMemorySingleProcess, ContinuousOverTwoGpus) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(1, [](std::shared_ptr<bootstrap> bs) {
    run_single_process_two_gpus(bs, memory_type::continuous);
  });
  EXPECT_TRUE(result.all_ok());
}

TEST(DeviceMemorySingleProcess, ChunkedOverTwoGpus) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(1, [](std::shared_ptr<bootstrap> bs) {
    run_single_process_two_gpus(bs, memory_type::chunked);
  });
  EXPECT_TRUE(result.all_ok());
}

TEST(DeviceMemorySingleProcess, DistributedIsRefused) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(1, [](std::shared_ptr<bootstrap> bs) {
    WM_CUDA_TRY(cudaSetDevice(0));
    std::shared_ptr<communicator> comm = wholememory::make_host_communicator(std::move(bs));
    allocation_options options;
    options.devices = {0, 1};
    EXPECT_THROW(wm_handle::create(comm, 4 * MiB, memory_type::distributed, memory_location::device,
                                   options),
                 wholememory::logic_error);
  });
  EXPECT_TRUE(result.all_ok());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// WHOLESTORE_BIG_TEST_GIB=64: one continuous allocation of that many GiB over two GPUs in two
/// processes; times create(), fills each part with a kernel and checks every byte from both.
TEST(DeviceMemoryBig, ContinuousTwoProcesses) {
  const char* env = std::getenv("WHOLESTORE_BIG_TEST_GIB");
  if (env == nullptr || *env == '\0') {
    GTEST_SKIP() << "set WHOLESTORE_BIG_TEST_GIB=<GiB over both GPUs> to run";
  }
  const double gib = std::atof(env);
  ASSERT_GT(gib, 0.0) << "WHOLESTORE_BIG_TEST_GIB=" << env << " is not a positive number";
  WHOLESTORE_REQUIRE_GPUS(2);
  const std::size_t total_bytes =
      static_cast<std::size_t>(gib * static_cast<double>(GiB)) / element_bytes * element_bytes;

  fork_result result = fork_ranks(
      2,
      [&](std::shared_ptr<bootstrap> bs) {
        const int rank = bs->rank();
        const int device = rank;
        WM_CUDA_TRY(cudaSetDevice(device));
        std::shared_ptr<communicator> comm = wholememory::make_host_communicator(std::move(bs));
        cuda_stream stream;
        device_buffer counter(sizeof(unsigned long long), device);
        const std::uint64_t salt = 0x9e3779b97f4a7c15ull;

        comm->barrier(stream.get());
        auto start = std::chrono::steady_clock::now();
        wm_handle wm =
            wm_handle::create(comm, total_bytes, memory_type::continuous, memory_location::device);
        const double create_s = seconds_since(start);
        if (rank == 0) {
          std::printf("create %g GiB continuous over 2 GPUs: %.3f s\n", gib, create_s);
        }

        const part_info mine = wm.local_part();
        const auto first = static_cast<std::int64_t>(mine.offset / element_bytes);
        const auto last = static_cast<std::int64_t>((mine.offset + mine.bytes) / element_bytes);
        start = std::chrono::steady_clock::now();
        write_pattern(wm.data(), first, last, 0, salt, stream.get());
        WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
        const double fill_s = seconds_since(start);
        std::printf("rank %d: fill %.2f GiB on GPU %d: %.3f s (%.0f GB/s)\n", rank,
                    static_cast<double>(mine.bytes) / GiB, device, fill_s,
                    static_cast<double>(mine.bytes) / fill_s / 1e9);
        rank_barrier(*comm, stream.get());

        const auto total = static_cast<std::int64_t>(total_bytes / element_bytes);
        start = std::chrono::steady_clock::now();
        const unsigned long long mismatches =
            device_mismatches(wm, device, 0, total, salt, counter, stream.get());
        const double verify_s = seconds_since(start);
        std::printf("rank %d: verify all %g GiB from GPU %d: %.3f s (%.0f GB/s), %llu mismatches\n",
                    rank, gib, device, verify_s, static_cast<double>(total_bytes) / verify_s / 1e9,
                    mismatches);
        std::fflush(stdout);
        EXPECT_EQ(mismatches, 0u);
        rank_barrier(*comm, stream.get());
        wm.free();
      },
      std::chrono::seconds(300));
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

}  // namespace
}  // namespace wholestore_test
