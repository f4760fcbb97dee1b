/*
 * File IO of device-located WholeMemory: every type on one rank (one GPU) and on two ranks
 * (two GPUs), stored from device memory and loaded back into device memory, into host memory,
 * and from host memory into device memory again.  The pattern is a function of the global
 * byte offset; parts are written and read through wholememory::copy_bytes and compared byte
 * for byte on the host.
 *
 * Also single-process multi-GPU memory, whose one rank owns (and moves) both parts.
 *
 * The test process never calls CUDA (see gpu_test_util.hpp): every body runs in forked ranks,
 * rank r on GPU r, and tests skip themselves when too few GPUs are visible.
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/file_io.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace fs = std::filesystem;
using wholememory::bootstrap;
using wholememory::communicator;
using wholememory::memory_location;
using wholememory::memory_type;
using wm_handle = wholememory::allocation;

std::uint8_t pattern_byte(std::uint64_t offset, std::uint64_t seed) {
  std::uint64_t x = (offset / 8 + 1) * 0x9e3779b97f4a7c15ull ^ (seed * 0xd1b54a32d192ed03ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> (8 * (offset % 8)));
}

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "wholestore-file-io-gpu-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

wm_handle make(const std::shared_ptr<communicator>& comm, std::size_t bytes, memory_type type,
               memory_location location) {
  wholememory::allocation_options options;
  if (comm->size() == 2 && bytes > 0) {
    // Uneven parts whose boundary is not a multiple of 8.
    options.part_bytes = {bytes / 3 + 5, bytes - bytes / 3 - 5};
  }
  return wm_handle::create(comm, bytes, type, location, options);
}

// Writes the pattern into this rank's part (from a host buffer), then waits for every rank.
// It waits before writing too: the ranks may still be checking the memory's previous pattern
// (mismatches reads the other rank's part), and a rank that wrote early made that check fail
// now and then (4 bytes of part 1 "differed" for rank 0 in about one run in five).
void fill(const wm_handle& wm, std::uint64_t seed) {
  wm.comm().barrier(nullptr);
  const wholememory::part_info p = wm.local_part();
  std::vector<std::uint8_t> host(p.bytes);
  for (std::size_t k = 0; k < p.bytes; ++k) host[k] = pattern_byte(p.offset + k, seed);
  wholememory::copy_bytes(p.ptr, host.data(), p.bytes);
  wm.comm().barrier(nullptr);
}

// Bytes of every part mapped here (all of continuous and chunked memory, the own part of
// distributed memory) that differ from the pattern.
std::uint64_t mismatches(const wm_handle& wm, std::uint64_t seed) {
  std::uint64_t bad = 0;
  for (int i = 0; i < wm.num_parts(); ++i) {
    const wholememory::part_info p = wm.part(i);
    if (p.ptr == nullptr || p.bytes == 0) continue;
    std::vector<std::uint8_t> host(p.bytes);
    wholememory::copy_bytes(host.data(), p.ptr, p.bytes);
    for (std::size_t k = 0; k < p.bytes; ++k) {
      if (host[k] != pattern_byte(p.offset + k, seed) && bad++ == 0) {
        ADD_FAILURE() << "byte " << p.offset + k << " (part " << i << ") differs";
      }
    }
  }
  return bad;
}

std::shared_ptr<communicator> rank_on_its_gpu(std::shared_ptr<bootstrap> bs) {
  wholememory::set_device(bs->rank());
  return wholememory::make_host_communicator(std::move(bs));
}

// Sizes: empty, fewer bytes than words, several staging chunks with a tail that is not a
// multiple of 8.
const std::size_t sizes[] = {0, 13, (std::size_t{9} << 20) + 5};

// Device -> file -> device, device -> file -> host, host -> file -> device, on `ranks` ranks.
void round_trips(int ranks, memory_type type, const std::string& dir) {
  const fork_result result = fork_ranks(ranks, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = rank_on_its_gpu(std::move(bs));
    for (std::size_t bytes : sizes) {
      SCOPED_TRACE(std::to_string(bytes) + " bytes");
      const std::uint64_t seed = bytes + 17 * ranks;
      wholememory::file_io_options options;
      options.block_bytes = 4096;  // blocks straddle the part boundary
      options.threads = 3;
      wm_handle source = make(comm, bytes, type, memory_location::device);
      fill(source, seed);
      wholememory::store(source, dir, options);

      wm_handle on_device = make(comm, bytes, type, memory_location::device);
      wholememory::load(on_device, dir, options);
      EXPECT_EQ(mismatches(on_device, seed), 0u) << "loaded into device memory";

      wm_handle on_host = make(comm, bytes, type, memory_location::host);
      wholememory::load(on_host, dir, options);
      EXPECT_EQ(mismatches(on_host, seed), 0u) << "loaded into host memory";

      fill(on_host, seed + 1);
      wholememory::store(on_host, dir, options);
      wholememory::load(on_device, dir, options);
      EXPECT_EQ(mismatches(on_device, seed + 1), 0u) << "stored from host, loaded into device";
    }
  });
  EXPECT_TRUE(result.all_ok()) << "a rank failed";
}

class FileIoGpu : public ::testing::TestWithParam<memory_type> {};

TEST_P(FileIoGpu, OneRankRoundTrips) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const temp_dir tmp;
  round_trips(1, GetParam(), tmp / "store");
}

TEST_P(FileIoGpu, TwoRanksRoundTripsAndReshard) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  const memory_type type = GetParam();
  round_trips(2, type, dir);

  // Stored from the device memory of two ranks, loaded into host memory of one rank.
  const std::size_t bytes = (std::size_t{5} << 20) + 3;
  fork_result stored = fork_ranks(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = rank_on_its_gpu(std::move(bs));
    wm_handle source = make(comm, bytes, type, memory_location::device);
    fill(source, 99);
    wholememory::store(source, dir);
  });
  EXPECT_TRUE(stored.all_ok());
  fork_result loaded = fork_ranks(1, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = rank_on_its_gpu(std::move(bs));
    wm_handle dest = make(comm, bytes, memory_type::continuous, memory_location::host);
    wholememory::load(dest, dir);
    EXPECT_EQ(mismatches(dest, 99), 0u);
  });
  EXPECT_TRUE(loaded.all_ok());
}

// Single-process multi-GPU memory: the one rank owns both parts and moves both.
TEST_P(FileIoGpu, OneProcessTwoGpus) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const memory_type type = GetParam();
  if (type == memory_type::distributed) GTEST_SKIP() << "distributed memory has no device list";
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  const fork_result result = fork_ranks(1, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = rank_on_its_gpu(std::move(bs));
    const std::size_t bytes = (std::size_t{3} << 20) + 11;
    wholememory::allocation_options options;
    options.devices = {0, 1};
    options.part_bytes = {(std::size_t{1} << 20) + 3, (std::size_t{2} << 20) + 8};
    wm_handle source = wm_handle::create(comm, bytes, type, memory_location::device, options);
    for (int i = 0; i < source.num_parts(); ++i) {
      const wholememory::part_info p = source.part(i);
      std::vector<std::uint8_t> host(p.bytes);
      for (std::size_t k = 0; k < p.bytes; ++k) host[k] = pattern_byte(p.offset + k, 5);
      wholememory::copy_bytes(p.ptr, host.data(), p.bytes);
    }
    wholememory::file_io_options io;
    io.block_bytes = 1 << 16;
    wholememory::store(source, dir, io);
    wm_handle on_host = make(comm, bytes, memory_type::chunked, memory_location::host);
    wholememory::load(on_host, dir, io);
    EXPECT_EQ(mismatches(on_host, 5), 0u);
    wm_handle back = wm_handle::create(comm, bytes, type, memory_location::device, options);
    wholememory::load(back, dir, io);
    EXPECT_EQ(mismatches(back, 5), 0u);
  });
  EXPECT_TRUE(result.all_ok());
}

INSTANTIATE_TEST_SUITE_P(DeviceTypes, FileIoGpu,
                         ::testing::Values(memory_type::continuous, memory_type::chunked,
                                           memory_type::distributed),
                         [](const auto& info) {
                           return std::string(wholememory::memory_type_name(info.param));
                         });

}  // namespace
}  // namespace wholestore_test
