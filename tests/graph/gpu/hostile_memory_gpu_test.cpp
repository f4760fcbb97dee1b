/*
 * The GPU sampler and walker meet a graph whose memory was changed after a valid load (the GPU
 * counterpart of HostileMemory in csr_validation_test.cpp): every call throws logic_error
 * naming the corrupt array, no kernel reads or writes out of bounds (compute-sanitizer memcheck
 * runs this file: scripts/gpu-sanitize.sh), and the sampler and the walker keep working once
 * the memory is repaired.  Continuous and chunked memory in device and host locations on one
 * GPU, distributed memory over two GPUs (NCCL), where the rank that did not meet the fault must
 * throw too instead of waiting in a collective.
 */
#include "common/multiprocess.hpp"
#include "graph/hostile_csr.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/sampling.hpp>
#include <graph/walks.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
namespace wm = ::wholememory;

host_csr hostile_graph() {
  generate_options go;
  go.num_nodes = 1000;
  go.num_edges = 12000;
  go.seed = 17;
  go.with_weights = true;
  go.threads = 1;
  return generate_graph(go);
}

/// Element `pos` (of `elem` bytes) of `mem` read or written through the part of this rank
/// that holds it; false when no part of this rank holds it (distributed memory).
bool access(const wm::allocation& mem, std::uint64_t pos, std::size_t elem, void* host,
            bool write) {
  const std::uint64_t at = pos * elem;
  for (int p = 0; p < mem.num_parts(); ++p) {
    const wm::part_info part = mem.part(p);
    if (part.ptr == nullptr || at < part.offset || at >= part.offset + part.bytes) continue;
    char* where = static_cast<char*>(part.ptr) + (at - part.offset);
    WM_CUDA_TRY(write ? copy_and_wait(where, host, elem, cudaMemcpyDefault)
                      : copy_and_wait(host, where, elem, cudaMemcpyDefault));
    return true;
  }
  return false;
}

using corruption = csr_corruption;
const std::vector<corruption> corruptions = csr_corruptions(999);

/// Writes `k` into the graph (where this rank holds the element) and returns what was there.
std::int64_t corrupt(csr_graph& g, const corruption& k, std::int64_t value) {
  std::int64_t old = 0;
  if (std::string(k.array) == "row_offsets") {
    if (access(g.row_offsets, k.position, 8, &old, false))
      access(g.row_offsets, k.position, 8, &value, true);
    return old;
  }
  std::int32_t old32 = 0, v32 = static_cast<std::int32_t>(value);
  if (access(g.col_indices, k.position, 4, &old32, false))
    access(g.col_indices, k.position, 4, &v32, true);
  return old32;
}

void expect_corrupt(const std::string& what, const char* array, bool names_array) {
  EXPECT_NE(what.find("corrupt"), std::string::npos) << what;
  if (names_array) {
    EXPECT_NE(what.find(array), std::string::npos) << what;
  }
}

/// Samples every node of `g` on the GPU with every method; each call must throw naming the
/// corruption (the other rank of a distributed graph may only say that another rank met it).
void sample_all_expecting_corruption(gpu_sampler& sampler, const host_csr& hg, const corruption& k,
                                     int device, cudaStream_t stream, bool distributed) {
  std::vector<std::int64_t> seeds(hg.num_nodes);
  std::iota(seeds.begin(), seeds.end(), 0);
  device_buffer d_seeds(seeds.size() * 8, device);
  WM_CUDA_TRY(copy_and_wait(d_seeds.get(), seeds.data(), seeds.size() * 8, cudaMemcpyHostToDevice));
  for (sample_method m :
       {sample_method::uniform, sample_method::uniform_with_replacement, sample_method::weighted}) {
    SCOPED_TRACE(sample_method_name(m));
    sample_options so;
    so.fanouts = {-1, 10, 5};
    so.method = m;
    try {
      auto blocks = sampler.sample(d_seeds.as<std::int64_t>(), seeds.size(), so, stream);
      for (const device_block& b : blocks) (void)b.to_host(stream);
      ADD_FAILURE() << "the sampler accepted the corrupt graph";
    } catch (const wm::logic_error& e) {
      expect_corrupt(e.what(), k.array, !distributed);
    }
  }
}

/// Blocks of a small batch (the nodes around the corrupted elements) on the host.
std::vector<block> sample_few(gpu_sampler& sampler, int device, cudaStream_t stream) {
  const std::vector<std::int64_t> few = {0, 499, 500, 998, 999};
  device_buffer d_few(few.size() * 8, device);
  WM_CUDA_TRY(copy_and_wait(d_few.get(), few.data(), few.size() * 8, cudaMemcpyHostToDevice));
  sample_options so;
  so.fanouts = {5, 3};
  so.random_seed = 11;
  std::vector<block> out;
  for (const device_block& b : sampler.sample(d_few.as<std::int64_t>(), few.size(), so, stream))
    out.push_back(b.to_host(stream));
  return out;
}

void expect_same_blocks(const std::vector<block>& got, const std::vector<block>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t h = 0; h < got.size(); ++h) {
    EXPECT_EQ(got[h].num_dst, want[h].num_dst) << "hop " << h;
    EXPECT_EQ(got[h].src_nodes, want[h].src_nodes) << "hop " << h;
    EXPECT_EQ(got[h].offsets, want[h].offsets) << "hop " << h;
    EXPECT_EQ(got[h].src_index, want[h].src_index) << "hop " << h;
  }
}

class HostileMemoryGpu
    : public ::testing::TestWithParam<std::tuple<wm::memory_type, wm::memory_location>> {};

TEST_P(HostileMemoryGpu, SamplerAndWalkerThrowAndRecover) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const auto [type, loc] = GetParam();
  fork_result r = fork_ranks(1, [type = type, loc = loc](std::shared_ptr<wm::bootstrap> bs) {
    wm::set_device(0);
    auto comm = wm::make_host_communicator(bs);
    const host_csr hg = hostile_graph();
    csr_graph g = make_graph(comm, hg, type, loc);
    cuda_stream stream;
    gpu_sampler sampler(g);
    gpu_walker walker(g);
    std::vector<std::int64_t> starts(hg.num_nodes);
    std::iota(starts.begin(), starts.end(), 0);
    device_buffer d_starts(starts.size() * 8, 0);
    WM_CUDA_TRY(
        copy_and_wait(d_starts.get(), starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
    walk_options wo;
    wo.length = 20;
    wo.p = 0.5;
    wo.q = 2.0;
    device_buffer d_walks(starts.size() * 21 * 8, 0);
    const std::vector<block> before = sample_few(sampler, 0, stream.get());
    for (const corruption& k : corruptions) {
      SCOPED_TRACE(std::string(k.array) + "[" + std::to_string(k.position) +
                   "] = " + std::to_string(k.value));
      const std::int64_t old = corrupt(g, k, k.value);
      sample_all_expecting_corruption(sampler, hg, k, 0, stream.get(), false);
      for (double p : {1.0, 0.5}) {
        wo.p = p;  // DeepWalk and node2vec kernels
        try {
          walker.walk(d_starts.as<std::int64_t>(), starts.size(), wo, d_walks.as<std::int64_t>(),
                      stream.get());
          // A corrupt row no walk reached is not an error; one every walk starts from is.
          if (std::string(k.array) == "row_offsets") {
            ADD_FAILURE() << "the walker accepted a corrupt row every walk starts from (p " << p
                          << ")";
          }
        } catch (const wm::logic_error& e) {
          expect_corrupt(e.what(), k.array, false);
        }
      }
      corrupt(g, k, old);
      // Repaired: both work again, the sampler with the blocks it gave before the corruption
      // (sample_host on the intact graph gives these too: GpuSampling.MatchesSampleHost).
      expect_same_blocks(sample_few(sampler, 0, stream.get()), before);
      walker.walk(d_starts.as<std::int64_t>(), starts.size(), wo, d_walks.as<std::int64_t>(),
                  stream.get());
      WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
      if (::testing::Test::HasFailure()) return;
    }
  });
  EXPECT_EQ(r.status[0], 0) << "the child failed (its output says why)";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HostileMemoryGpu,
    ::testing::Combine(::testing::Values(wm::memory_type::continuous, wm::memory_type::chunked),
                       ::testing::Values(wm::memory_location::device, wm::memory_location::host)),
    [](const auto& info) {
      return std::string(wm::memory_type_name(std::get<0>(info.param))) + "_" +
             wm::memory_location_name(std::get<1>(info.param));
    });

// Distributed memory over two GPUs: one rank holds the corrupt element; both throw (the other
// one says another rank met it), neither hangs, and sampling works again once repaired.
TEST(HostileMemoryGpuDistributed, BothRanksThrowAndRecover) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result r = fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = bs->rank();
    wm::set_device(device);
    auto comm = wm::make_nccl_communicator(bs, device);
    const host_csr hg = hostile_graph();
    // Device memory served by the owners of the nodes, host memory through the gathers.
    for (wm::memory_location loc : {wm::memory_location::device, wm::memory_location::host}) {
      ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", loc == wm::memory_location::device ? "1" : "0", 1);
      csr_graph g = make_graph(comm, hg, wm::memory_type::distributed, loc);
      cuda_stream stream;
      gpu_sampler sampler(g);
      const std::vector<block> before = sample_few(sampler, device, stream.get());
      for (const corruption& k : corruptions) {
        SCOPED_TRACE(std::string(k.array) + "[" + std::to_string(k.position) +
                     "] = " + std::to_string(k.value) + " " + wm::memory_location_name(loc));
        const std::int64_t old = corrupt(g, k, k.value);
        comm->barrier(nullptr);
        sample_all_expecting_corruption(sampler, hg, k, device, stream.get(), true);
        comm->barrier(nullptr);
        corrupt(g, k, old);
        comm->barrier(nullptr);
        expect_same_blocks(sample_few(sampler, device, stream.get()), before);
        if (::testing::Test::HasFailure()) return;
      }
    }
  });
  EXPECT_EQ(r.status[0], 0) << "rank 0 failed (its output says why)";
  EXPECT_EQ(r.status[1], 0) << "rank 1 failed (its output says why)";
}

}  // namespace
}  // namespace wholestore_test
