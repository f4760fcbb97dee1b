/*
 * The GPU sampler: blocks equal to the CPU path's (sample_host) and to a plain reference of
 * the sampling spec written here, bit for bit, for every method, fanouts -1, 0 and larger than
 * the degrees, continuous and chunked memory in device and host locations, int32 and int64
 * column indices, seeds with repeats, an empty batch, with and without edge ids; properties of
 * the blocks (every edge exists, no repeats without replacement); the out-of-range seed error;
 * distributed memory over two GPUs (one forked process each, NCCL).  The test process never
 * calls CUDA itself (gpu_test_util.hpp).
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/sampling.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
namespace wm = ::wholememory;

// ---- reference of the spec (sampling.hpp, detail/sample_select.hpp) --------------------------

std::vector<std::int64_t> ref_weighted(const host_csr& g, std::uint64_t key, std::int64_t start,
                                       std::int64_t d, int k) {
  std::vector<std::int64_t> out;
  if (k < 0) {
    for (std::int64_t p = 0; p < d; ++p) out.push_back(p);
    return out;
  }
  std::vector<std::pair<double, std::int64_t>> race;
  for (std::int64_t p = 0; p < d; ++p) {
    float w = g.edge_weights[static_cast<std::size_t>(start + p)];
    if (w > 0.0f) race.emplace_back(detail::race_time(key, p, w), p);
  }
  if (static_cast<std::int64_t>(race.size()) > k) {
    std::sort(race.begin(), race.end(), [](const auto& a, const auto& b) {
      return detail::race_before(a.first, a.second, b.first, b.second);
    });
    race.resize(static_cast<std::size_t>(k));
  }
  for (const auto& r : race) out.push_back(r.second);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<block> reference_sample(const host_csr& g, const std::vector<std::int64_t>& seeds,
                                    const sample_options& o) {
  std::vector<std::int64_t> dst;
  {
    std::unordered_map<std::int64_t, int> seen;
    for (std::int64_t s : seeds)
      if (seen.emplace(s, 0).second) dst.push_back(s);
  }
  std::vector<block> blocks;
  for (std::size_t h = 0; h < o.fanouts.size(); ++h) {
    const int k = o.fanouts[h];
    block b;
    b.num_dst = static_cast<std::int64_t>(dst.size());
    b.src_nodes = dst;
    std::unordered_map<std::int64_t, std::int32_t> local;
    for (std::size_t i = 0; i < dst.size(); ++i) local[dst[i]] = static_cast<std::int32_t>(i);
    b.offsets.push_back(0);
    for (std::int64_t v : dst) {
      const std::int64_t start = g.row_offsets[static_cast<std::size_t>(v)];
      const std::int64_t d = g.row_offsets[static_cast<std::size_t>(v) + 1] - start;
      const std::uint64_t key = detail::node_key(o.random_seed, static_cast<int>(h), v);
      std::vector<std::int64_t> pos;
      if (o.method == sample_method::weighted) {
        pos = ref_weighted(g, key, start, d, k);
      } else {
        pos.resize(static_cast<std::size_t>(detail::max_sample_count(o.method, d, k)));
        std::int64_t n = o.method == sample_method::uniform
                             ? detail::select_uniform(key, d, k, pos.data())
                             : detail::select_with_replacement(key, d, k, pos.data());
        pos.resize(static_cast<std::size_t>(n));
      }
      for (std::int64_t p : pos) {
        std::int64_t u = g.col_indices[static_cast<std::size_t>(start + p)];
        auto it = local.emplace(u, static_cast<std::int32_t>(b.src_nodes.size()));
        if (it.second) b.src_nodes.push_back(u);
        b.src_index.push_back(it.first->second);
        if (o.edge_ids) b.edge_ids.push_back(start + p);
      }
      b.offsets.push_back(static_cast<std::int64_t>(b.src_index.size()));
    }
    dst = b.src_nodes;
    blocks.push_back(std::move(b));
  }
  return blocks;
}

// ---- helpers ----------------------------------------------------------------------------------

void expect_same(const std::vector<block>& got, const std::vector<block>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t h = 0; h < got.size(); ++h) {
    EXPECT_EQ(got[h].num_dst, want[h].num_dst) << what << " hop " << h;
    EXPECT_EQ(got[h].src_nodes, want[h].src_nodes) << what << " hop " << h << " src_nodes";
    EXPECT_EQ(got[h].offsets, want[h].offsets) << what << " hop " << h << " offsets";
    EXPECT_EQ(got[h].src_index, want[h].src_index) << what << " hop " << h << " src_index";
    EXPECT_EQ(got[h].edge_ids, want[h].edge_ids) << what << " hop " << h << " edge_ids";
  }
}

/// Every edge exists in the graph, dst nodes lead src_nodes, hops chain, and without
/// replacement no node takes an edge twice.
void check_properties(const host_csr& g, const std::vector<block>& blocks, const sample_options& o,
                      const std::string& what) {
  for (std::size_t h = 0; h < blocks.size(); ++h) {
    const block& b = blocks[h];
    ASSERT_EQ(b.offsets.size(), static_cast<std::size_t>(b.num_dst) + 1) << what;
    ASSERT_GE(b.num_src(), b.num_dst) << what;
    if (h > 0) {
      EXPECT_EQ(b.num_dst, blocks[h - 1].num_src()) << what;
      EXPECT_TRUE(std::equal(b.src_nodes.begin(), b.src_nodes.begin() + b.num_dst,
                             blocks[h - 1].src_nodes.begin()))
          << what;
    }
    EXPECT_EQ(b.offsets.back(), b.num_edges()) << what;
    for (std::int64_t i = 0; i < b.num_dst; ++i) {
      const std::int64_t v = b.src_nodes[static_cast<std::size_t>(i)];
      const std::int64_t s = g.row_offsets[static_cast<std::size_t>(v)];
      const std::int64_t e = g.row_offsets[static_cast<std::size_t>(v) + 1];
      std::vector<std::int64_t> taken;
      for (std::int64_t x = b.offsets[static_cast<std::size_t>(i)];
           x < b.offsets[static_cast<std::size_t>(i) + 1]; ++x) {
        const std::int32_t li = b.src_index[static_cast<std::size_t>(x)];
        ASSERT_GE(li, 0) << what;
        ASSERT_LT(li, b.num_src()) << what;
        const std::int64_t u = b.src_nodes[static_cast<std::size_t>(li)];
        if (o.edge_ids) {
          const std::int64_t id = b.edge_ids[static_cast<std::size_t>(x)];
          ASSERT_GE(id, s) << what;
          ASSERT_LT(id, e) << what;
          EXPECT_EQ(g.col_indices[static_cast<std::size_t>(id)], u) << what;
          taken.push_back(id);
        } else {
          EXPECT_TRUE(std::find(g.col_indices.begin() + s, g.col_indices.begin() + e, u) !=
                      g.col_indices.begin() + e)
              << what << ": " << v << " -> " << u << " is no edge";
        }
      }
      if (o.edge_ids && o.method != sample_method::uniform_with_replacement) {
        std::sort(taken.begin(), taken.end());
        EXPECT_TRUE(std::adjacent_find(taken.begin(), taken.end()) == taken.end())
            << what << ": node " << v << " took an edge twice";
      }
    }
  }
}

/// An R-MAT graph with weights, some of them zero (never taken by weighted; datasets hold no
/// negative weights, rule 6).
host_csr test_graph(std::uint64_t nodes, std::uint64_t edges, std::uint64_t seed) {
  generate_options go;
  go.num_nodes = nodes;
  go.num_edges = edges;
  go.rmat = true;
  go.seed = seed;
  go.with_weights = true;
  go.threads = 1;
  host_csr g = generate_graph(go);
  for (std::size_t e = 0; e < g.edge_weights.size(); e += 7) g.edge_weights[e] = 0.0f;
  for (std::size_t e = 3; e < g.edge_weights.size(); e += 29) g.edge_weights[e] = 0.0f;
  return g;
}

/// Seeds with repeats, the highest-degree node and an isolated node (when there is one).
std::vector<std::int64_t> test_seeds(const host_csr& g, std::size_t n, std::uint64_t salt) {
  std::vector<std::int64_t> seeds;
  std::int64_t hub = 0, isolated = -1;
  for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
    std::int64_t d = g.row_offsets[v + 1] - g.row_offsets[v];
    if (d > g.row_offsets[hub + 1] - g.row_offsets[hub]) hub = static_cast<std::int64_t>(v);
    if (d == 0 && isolated < 0) isolated = static_cast<std::int64_t>(v);
  }
  seeds.push_back(hub);
  if (isolated >= 0) seeds.push_back(isolated);
  for (std::size_t i = 0; seeds.size() < n; ++i) {
    std::uint64_t x = detail::mix64(salt * 1000003 + i);
    seeds.push_back(static_cast<std::int64_t>(x % g.num_nodes));
    if (i % 5 == 0) seeds.push_back(seeds[seeds.size() / 2]);  // repeats
  }
  seeds.resize(n);
  return seeds;
}

/// A graph whose hubs take the sampler's block paths for weighted hops (more than 2048
/// edges): node 0 has 30,000 edges (several count chunks), node 1 5,000, node 2 10,000 with
/// only 3 positive weights (fewer than the fanout), node 3 9,000 with 40 positive weights
/// (more than 32: several race rounds at fanout 35).  The other nodes have 0 to 20 edges,
/// many of them to the hubs, so hubs fill later hops too.
host_csr hub_graph() {
  const std::uint64_t n = 3000;
  host_csr g;
  g.num_nodes = n;
  g.row_offsets.push_back(0);
  std::uint64_t x = 12345;
  auto next = [&x]() { return x = detail::mix64(x); };
  for (std::uint64_t v = 0; v < n; ++v) {
    std::int64_t d = v == 0   ? 30000
                     : v == 1 ? 5000
                     : v == 2 ? 10000
                     : v == 3 ? 9000
                              : static_cast<std::int64_t>(next() % 21);
    for (std::int64_t e = 0; e < d; ++e) {
      const std::uint64_t r = next();
      g.col_indices.push_back(r % 3 == 0 ? static_cast<std::int64_t>(r % 4)
                                         : static_cast<std::int64_t>(r % n));
      float w = static_cast<float>((r >> 40) % 1000 + 1) / 1000.0f;
      if (v == 2) w = e % 3001 == 7 ? w : 0.0f;
      if (v == 3) w = e % 225 == 11 ? w : 0.0f;
      if (v > 3 && r % 11 == 0) w = 0.0f;
      g.edge_weights.push_back(w);
    }
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  return g;
}

struct seed_buffer {
  device_buffer buf;
  seed_buffer(const std::vector<std::int64_t>& seeds, int device)
      : buf(seeds.size() * 8 + 8, device) {
    if (!seeds.empty())
      WM_CUDA_TRY(copy_and_wait(buf.get(), seeds.data(), seeds.size() * 8, cudaMemcpyHostToDevice));
  }
  const std::int64_t* get() const { return buf.as<const std::int64_t>(); }
};

std::vector<block> to_host(const std::vector<device_block>& blocks, cudaStream_t stream) {
  std::vector<block> out;
  for (const device_block& b : blocks) out.push_back(b.to_host(stream));
  return out;
}

std::vector<block> gpu_sample(gpu_sampler& s, const std::vector<std::int64_t>& seeds,
                              const sample_options& o, int device, cudaStream_t stream) {
  seed_buffer d(seeds, device);
  return to_host(s.sample(d.get(), seeds.size(), o, stream), stream);
}

void run_on_gpus(int ranks, const rank_body& body) {
  fork_result result = fork_ranks(ranks, body);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

int start_device(std::shared_ptr<wm::bootstrap> bs) {
  int count = 0;
  WM_CUDA_TRY(cudaGetDeviceCount(&count));
  int device = bs->rank() % count;
  WM_CUDA_TRY(cudaSetDevice(device));
  return device;
}

const std::vector<std::vector<int>> fanout_sets = {{15, 10, 5}, {-1, 3}, {0, 4},      {40, 2},
                                                   {70},        {3, -1}, {1, 1, 1, 1}};
const std::vector<sample_method> methods = {
    sample_method::uniform, sample_method::uniform_with_replacement, sample_method::weighted};

std::string describe(wm::memory_type t, wm::memory_location l, sample_method m,
                     const std::vector<int>& f, bool ids) {
  std::string s = std::string(wm::memory_type_name(t)) + "/" + wm::memory_location_name(l) +
                  " method " + std::to_string(static_cast<int>(m)) + " fanouts";
  for (int x : f) s += " " + std::to_string(x);
  return s + (ids ? " edge_ids" : "");
}

using layout = std::tuple<wm::memory_type, wm::memory_location>;
class GpuSampling : public ::testing::TestWithParam<layout> {};

/// Runs every method x fanout set x edge_ids case on one graph layout; `cpu` also compares
/// with sample_host.
void every_case(wm::memory_type type, wm::memory_location loc, bool cpu, bool int64_cols) {
  run_on_gpus(1, [=](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    host_csr hg = test_graph(int64_cols ? 700 : 3000, int64_cols ? 9000 : 40000, 11);
    csr_graph g = make_graph(comm, hg, type, loc);
    if (int64_cols) {
      // make_graph stores int32 columns for graphs this small: swap in an int64 copy.
      g.col_type = wm::dtype::int64;
      wm::allocation_options ao;
      ao.granularity = 8;
      g.col_indices = wm::allocation::create(comm, hg.col_indices.size() * 8, type, loc, ao);
      for (int p = 0; p < g.col_indices.num_parts(); ++p) {
        wm::part_info part = g.col_indices.part(p);
        if (part.bytes)
          WM_CUDA_TRY(copy_and_wait(
              part.ptr, reinterpret_cast<const char*>(hg.col_indices.data()) + part.offset,
              part.bytes, cudaMemcpyDefault));
      }
    }
    // sample_host reads host memory: it gets a host copy when the GPU reads device memory.
    csr_graph host_copy;
    if (cpu && loc == wm::memory_location::device) {
      host_copy = make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::host);
    }
    const csr_graph& cpu_graph = host_copy.row_offsets ? host_copy : g;
    cuda_stream stream;
    gpu_sampler sampler(g);
    std::uint64_t rs = 5;
    for (sample_method m : methods) {
      for (const auto& f : fanout_sets) {
        for (bool ids : {false, true}) {
          sample_options o{f};
          o.method = m;
          o.random_seed = rs++;
          o.edge_ids = ids;
          auto seeds = test_seeds(hg, 64, rs);
          const std::string what = describe(type, loc, m, f, ids);
          auto got = gpu_sample(sampler, seeds, o, device, stream.get());
          expect_same(got, reference_sample(hg, seeds, o), what + " vs reference");
          check_properties(hg, got, o, what);
          if (cpu) {
            sample_result want = sample_host(cpu_graph, seeds.data(), seeds.size(), o, 2);
            expect_same(got, want.blocks, what + " vs sample_host");
          }
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  });
}

TEST_P(GpuSampling, MatchesTheReferenceOfTheSpec) {
  WHOLESTORE_REQUIRE_GPUS(1);
  auto [type, loc] = GetParam();
  every_case(type, loc, false, false);
}

TEST_P(GpuSampling, MatchesSampleHost) {
  WHOLESTORE_REQUIRE_GPUS(1);
  auto [type, loc] = GetParam();
  every_case(type, loc, true, false);
}

TEST_P(GpuSampling, Int64ColumnIndices) {
  WHOLESTORE_REQUIRE_GPUS(1);
  auto [type, loc] = GetParam();
  every_case(type, loc, false, true);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GpuSampling,
    ::testing::Combine(::testing::Values(wm::memory_type::continuous, wm::memory_type::chunked),
                       ::testing::Values(wm::memory_location::device, wm::memory_location::host)),
    [](const ::testing::TestParamInfo<layout>& info) {
      return std::string(wm::memory_type_name(std::get<0>(info.param))) + "_" +
             wm::memory_location_name(std::get<1>(info.param));
    });

// Several ranks on one GPU (the README's 2-rank default on a 1-GPU machine): the graph in
// continuous or chunked device memory over the host communicator (VMM or IPC between processes
// on the same device), every rank sampling its own seeds with its own sampler.
TEST(GpuSamplingShared, RanksSharingOneGpuMatchTheReference) {
  WHOLESTORE_REQUIRE_GPUS(1);
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks on GPU 0");
    run_on_gpus(ranks, [](std::shared_ptr<wm::bootstrap> bs) {
      WM_CUDA_TRY(cudaSetDevice(0));
      auto comm = wm::make_host_communicator(bs);
      host_csr hg = test_graph(2000, 30000, 23);
      cuda_stream stream;
      for (wm::memory_type type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
        csr_graph g = make_graph(comm, hg, type, wm::memory_location::device);
        gpu_sampler sampler(g);
        for (sample_method m : methods) {
          sample_options o{{15, 10, 5}};
          o.method = m;
          o.random_seed = 77 + static_cast<std::uint64_t>(comm->rank());
          auto seeds = test_seeds(hg, 100, 900 + static_cast<std::uint64_t>(comm->rank()));
          const std::string what =
              describe(type, wm::memory_location::device, m, o.fanouts, false) + " rank " +
              std::to_string(comm->rank());
          auto got = gpu_sample(sampler, seeds, o, 0, stream.get());
          expect_same(got, reference_sample(hg, seeds, o), what + " vs reference");
          if (::testing::Test::HasFailure()) return;
        }
        comm->barrier(nullptr);
      }
    });
  }
}

TEST(GpuSamplingEdge, EmptyBatchSeedsInHostMemoryAndRepeatedCalls) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_on_gpus(1, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    host_csr hg = test_graph(2000, 30000, 3);
    csr_graph g = make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::device);
    cuda_stream stream;
    gpu_sampler sampler(g);
    sample_options o{{5, 5}};
    o.edge_ids = true;
    auto empty = gpu_sample(sampler, {}, o, device, stream.get());
    ASSERT_EQ(empty.size(), 2u);
    for (const block& b : empty) {
      EXPECT_EQ(b.num_dst, 0);
      EXPECT_EQ(b.offsets, std::vector<std::int64_t>{0});
      EXPECT_TRUE(b.src_nodes.empty());
      EXPECT_TRUE(b.src_index.empty());
    }
    // Seeds in pinned host memory; batches of growing and shrinking size on one sampler.
    void* pinned = nullptr;
    WM_CUDA_TRY(cudaMallocHost(&pinned, 4096 * 8));
    auto* host_seeds = static_cast<std::int64_t*>(pinned);
    for (std::size_t n : {1, 4096, 17, 1000, 4096}) {
      auto seeds = test_seeds(hg, n, n);
      std::copy(seeds.begin(), seeds.end(), host_seeds);
      o.random_seed = n;
      auto got = to_host(sampler.sample(host_seeds, n, o, stream.get()), stream.get());
      expect_same(got, reference_sample(hg, seeds, o), "batch " + std::to_string(n));
    }
    WM_CUDA_TRY(cudaFreeHost(pinned));
    // No hops: nothing but the seed check.
    o.fanouts.clear();
    EXPECT_TRUE(gpu_sample(sampler, {1, 2}, o, device, stream.get()).empty());
  });
}

TEST(GpuSamplingEdge, WeightedHubsMatchTheReferenceAndSampleHost) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_on_gpus(1, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    // As built (some weights zero: the sampler counts positive weights), and with
    // every weight positive (it takes the degrees as those counts).
    host_csr positive = hub_graph();
    for (float& w : positive.edge_weights) w = w > 0.0f ? w : 0.25f;
    cuda_stream stream;
    for (const host_csr& hg : {hub_graph(), positive})
      for (auto [type, loc] : {layout{wm::memory_type::continuous, wm::memory_location::device},
                               layout{wm::memory_type::chunked, wm::memory_location::host}}) {
        csr_graph host_copy =
            make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::host);
        csr_graph g = make_graph(comm, hg, type, loc);
        gpu_sampler sampler(g);
        std::uint64_t rs = 77;
        for (const std::vector<int>& f : {std::vector<int>{5, 10}, std::vector<int>{35, 3},
                                          std::vector<int>{2, 2, 2}, std::vector<int>{-1, 4}}) {
          for (std::size_t n : {std::size_t{4}, std::size_t{300}}) {
            sample_options o{f};
            o.method = sample_method::weighted;
            o.random_seed = rs++;
            o.edge_ids = (rs % 2) == 0;
            std::vector<std::int64_t> seeds = {0, 1, 2, 3};
            for (std::size_t i = seeds.size(); i < n; ++i) {
              seeds.push_back(static_cast<std::int64_t>(detail::mix64(rs + i) % hg.num_nodes));
            }
            const std::string what = describe(type, loc, o.method, f, o.edge_ids) + " hubs, " +
                                     std::to_string(n) + " seeds";
            auto got = gpu_sample(sampler, seeds, o, device, stream.get());
            expect_same(got, reference_sample(hg, seeds, o), what + " vs reference");
            check_properties(hg, got, o, what);
            sample_result want = sample_host(host_copy, seeds.data(), seeds.size(), o, 2);
            expect_same(got, want.blocks, what + " vs sample_host");
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
  });
}

/// Repeated calls of one shape replay a captured CUDA graph: each must still sample its own
/// seeds with its own random seed, report its own counts, and catch a bad seed; other shapes
/// in between, and buffers growing, must not disturb it.
TEST(GpuSamplingEdge, RepeatedShapesMatchTheReference) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_on_gpus(1, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    host_csr hg = test_graph(3000, 40000, 8);
    csr_graph g = make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::device);
    cuda_stream stream;
    gpu_sampler sampler(g);
    for (sample_method m : methods) {
      sample_options o{{6, 4, 3}};
      o.method = m;
      o.random_seed = 31;
      o.edge_ids = m == sample_method::uniform;
      for (int call = 0; call < 6; ++call) {
        const std::size_t n = call == 3 ? 500 : 200;  // call 3: another shape, larger buffers
        o.random_seed = 31 + static_cast<std::uint64_t>(call % 2);  // a replay takes a new one
        auto seeds = test_seeds(hg, n, static_cast<std::uint64_t>(call) * 17 + 1);
        const std::string what = describe(wm::memory_type::continuous, wm::memory_location::device,
                                          m, o.fanouts, o.edge_ids) +
                                 " call " + std::to_string(call);
        auto got = gpu_sample(sampler, seeds, o, device, stream.get());
        expect_same(got, reference_sample(hg, seeds, o), what);
        if (::testing::Test::HasFailure()) return;
      }
      auto seeds = test_seeds(hg, 200, 99);
      seeds[150] = 3000;
      EXPECT_THROW(gpu_sample(sampler, seeds, o, device, stream.get()), wm::logic_error);
      seeds[150] = 5;
      expect_same(gpu_sample(sampler, seeds, o, device, stream.get()),
                  reference_sample(hg, seeds, o), "after the error");
    }
  });
}

TEST(GpuSamplingEdge, OutOfRangeSeedNamesValuePositionAndSize) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_on_gpus(1, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    host_csr hg = test_graph(500, 4000, 4);
    csr_graph g = make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::device);
    cuda_stream stream;
    gpu_sampler sampler(g);
    sample_options o{{3}};
    std::vector<std::int64_t> seeds = {1, 2, 3, 777, 4, -5, 6};
    try {
      gpu_sample(sampler, seeds, o, device, stream.get());
      ADD_FAILURE() << "no error for seed 777";
    } catch (const wm::logic_error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("777"), std::string::npos) << msg;
      EXPECT_NE(msg.find("position 3"), std::string::npos) << msg;
      EXPECT_NE(msg.find("500"), std::string::npos) << msg;
    }
    seeds = {-5, 1};
    try {
      gpu_sample(sampler, seeds, o, device, stream.get());
      ADD_FAILURE() << "no error for seed -5";
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("-5"), std::string::npos) << e.what();
    }
    // Bad options.
    o = sample_options{{-2}};
    EXPECT_THROW(gpu_sample(sampler, {1}, o, device, stream.get()), wm::logic_error);
    // The sampler still works after the errors.
    o = sample_options{{3, 2}};
    seeds = {1, 2, 3};
    expect_same(gpu_sample(sampler, seeds, o, device, stream.get()), reference_sample(hg, seeds, o),
                "after errors");
    // Weighted on a graph without weights.
    hg.edge_weights.clear();
    csr_graph unweighted =
        make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::device);
    gpu_sampler s2(unweighted);
    o.method = sample_method::weighted;
    EXPECT_THROW(gpu_sample(s2, seeds, o, device, stream.get()), wm::logic_error);
  });
}

// A weighted node above 256 count chunks (2,097,152 edges) whose positive weights mostly sit
// past them: the count of positive weights covers every chunk (it stopped at 256 before), so
// the race and the offsets are the reference's.
TEST(GpuSamplingHubs, WeightedNodeBeyondTheCountChunks) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_on_gpus(1, [](std::shared_ptr<wm::bootstrap> bs) {
    const int device = start_device(bs);
    auto comm = wm::make_host_communicator(bs);
    host_csr hg;
    hg.num_nodes = 1000;
    const std::int64_t hub = 2200000;
    hg.row_offsets.assign(hg.num_nodes + 1, hub);
    hg.row_offsets[0] = 0;
    hg.col_indices.resize(static_cast<std::size_t>(hub));
    hg.edge_weights.assign(static_cast<std::size_t>(hub), 0.0f);
    for (std::int64_t e = 0; e < hub; ++e) {
      hg.col_indices[static_cast<std::size_t>(e)] = 1 + e % 999;
    }
    for (std::int64_t e : {std::int64_t{10}, std::int64_t{1000000}, std::int64_t{2000000}})
      hg.edge_weights[static_cast<std::size_t>(e)] = 0.5f;
    for (std::int64_t e = 2100000; e < 2100040; ++e)
      hg.edge_weights[static_cast<std::size_t>(e)] = 0.25f + static_cast<float>(e % 7);
    csr_graph g = make_graph(comm, hg, wm::memory_type::continuous, wm::memory_location::device);
    cuda_stream stream;
    gpu_sampler sampler(g);
    for (int fanout : {5, 40, 50}) {
      sample_options o{{fanout}};
      o.method = sample_method::weighted;
      o.random_seed = 77;
      o.edge_ids = true;
      const std::vector<std::int64_t> seeds = {0, 3};
      const std::string what = "fanout " + std::to_string(fanout);
      auto got = gpu_sample(sampler, seeds, o, device, stream.get());
      expect_same(got, reference_sample(hg, seeds, o), what);
      check_properties(hg, got, o, what);
    }
  });
}

class GpuSamplingDistributed : public ::testing::TestWithParam<wm::memory_location> {};

/// `hg` in distributed memory laid out by hand, with int32 or int64 columns: the edges cut
/// where the nodes of the ranks' row offsets end (`follow_nodes`, the layout make_graph gives,
/// which the owners can serve), or split evenly by element as distributed graphs were before
/// (the sampler then reads rows and columns through the gather's exchange).
csr_graph hand_split_graph(const std::shared_ptr<wm::communicator>& comm, const host_csr& hg,
                           wm::memory_location loc, bool follow_nodes, wm::dtype col_type) {
  csr_graph g;
  g.num_nodes = hg.num_nodes;
  g.num_edges = hg.num_edges();
  g.col_type = col_type;
  const std::vector<std::int32_t> cols32(hg.col_indices.begin(), hg.col_indices.end());
  const void* cols = col_type == wm::dtype::int32 ? static_cast<const void*>(cols32.data())
                                                  : static_cast<const void*>(hg.col_indices.data());
  std::vector<std::uint64_t> cut;  // follow_nodes: the first edge of every rank, then num_edges
  auto put = [&](const void* data, std::size_t count, std::size_t elem, bool edges) {
    wm::allocation_options ao;
    ao.granularity = elem;
    std::size_t total = std::max(count, std::size_t{1}) * elem;
    if (edges && follow_nodes) {
      for (std::size_t r = 0; r + 1 < cut.size(); ++r)
        ao.part_bytes.push_back((cut[r + 1] - cut[r]) * elem);
      total = count * elem;
    }
    wm::allocation a = wm::allocation::create(comm, total, wm::memory_type::distributed, loc, ao);
    const wm::part_info p = a.local_part();
    const std::size_t have = count * elem;
    if (p.bytes > 0 && p.offset < have) {
      WM_CUDA_TRY(copy_and_wait(p.ptr, static_cast<const char*>(data) + p.offset,
                                std::min(p.bytes, have - p.offset), cudaMemcpyDefault));
    }
    return a;
  };
  g.row_offsets = put(hg.row_offsets.data(), hg.row_offsets.size(), 8, false);
  for (int r = 0; r < g.row_offsets.num_parts(); ++r) {
    const std::uint64_t first = g.row_offsets.part(r).offset / 8;
    cut.push_back(static_cast<std::uint64_t>(hg.row_offsets[std::min(first, hg.num_nodes)]));
  }
  cut.push_back(hg.num_edges());
  g.col_indices = put(cols, hg.col_indices.size(), wm::dtype_size(col_type), true);
  if (!hg.edge_weights.empty())
    g.edge_weights = put(hg.edge_weights.data(), hg.edge_weights.size(), 4, true);
  comm->barrier(nullptr);
  return g;
}

/// Node 0 holds every edge but a few of node 1's: over two ranks the second holds no edges.
host_csr star_graph() {
  const std::uint64_t n = 2000;
  host_csr g;
  g.num_nodes = n;
  g.row_offsets.assign(n + 1, 0);
  std::uint64_t x = 777;
  for (int e = 0; e < 6000; ++e) {
    x = detail::mix64(x);
    g.col_indices.push_back(static_cast<std::int64_t>(x % n));
    g.edge_weights.push_back(e % 5 == 0 ? 0.0f : static_cast<float>(x % 97 + 1));
  }
  g.row_offsets[1] = 5990;
  for (std::uint64_t v = 2; v <= n; ++v) g.row_offsets[v] = 6000;
  return g;
}

// Distributed graphs as make_graph lays them out (every node's edges on its owner: with
// WHOLESTORE_SAMPLE_BY_OWNER=1 the sampler asks the owners) and split evenly (the sampler
// gathers through the exchange), and a graph whose second rank holds no edges: every block
// equal to the reference's.
TEST_P(GpuSamplingDistributed, OwnersAndEvenSplitsMatchTheReference) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const wm::memory_location loc = GetParam();
  run_on_gpus(2, [loc](std::shared_ptr<wm::bootstrap> bs) {
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", "1", 1);
    const int device = start_device(bs);
    auto comm = wm::make_nccl_communicator(bs, device);
    const int rank = bs->rank();
    const host_csr rmat = test_graph(2500, 30000, 5);
    const host_csr star = star_graph();
    enum class built { make_graph, by_hand_int64, even_split };
    struct layout_case {
      const char* name;
      const host_csr* hg;
      built how;
    };
    const layout_case cases[] = {{"owned", &rmat, built::make_graph},
                                 {"owned, int64 columns", &rmat, built::by_hand_int64},
                                 {"even split", &rmat, built::even_split},
                                 {"star, owned", &star, built::make_graph},
                                 {"star, even split", &star, built::even_split}};
    std::uint64_t rs = 100;
    for (const layout_case& lc : cases) {
      csr_graph g = lc.how == built::make_graph
                        ? make_graph(comm, *lc.hg, wm::memory_type::distributed, loc)
                        : hand_split_graph(
                              comm, *lc.hg, loc, lc.how == built::by_hand_int64,
                              lc.how == built::by_hand_int64 ? wm::dtype::int64 : wm::dtype::int32);
      const bool served = lc.how != built::even_split;
      cuda_stream stream;
      gpu_sampler sampler(g);
      for (sample_method m : methods) {
        for (const std::vector<int>& f :
             {std::vector<int>{15, 10, 5}, std::vector<int>{-1, 3}, std::vector<int>{3, 0, 40}}) {
          sample_options o{f};
          o.method = m;
          // Every rank its own random seed: an owner draws with the seed of the rank that asked.
          o.random_seed = rs++ + 7919 * static_cast<std::uint64_t>(rank);
          o.edge_ids = (rs % 2) == 0;
          const std::size_t n = (rank == 0 && rs % 4 == 0) ? 0 : 30 + 17 * rank;
          auto seeds = test_seeds(*lc.hg, n, rs * 3 + rank);
          if (!seeds.empty()) seeds.front() = rank == 0 ? 0 : 1;  // the star's centers
          const std::string what = std::string(lc.name) + " " +
                                   describe(wm::memory_type::distributed, loc, m, f, o.edge_ids) +
                                   " rank " + std::to_string(rank);
          auto got = gpu_sample(sampler, seeds, o, device, stream.get());
          expect_same(got, reference_sample(*lc.hg, seeds, o), what);
          check_properties(*lc.hg, got, o, what);
          EXPECT_EQ(sampler.served_by_owners(), served) << what;
          if (::testing::Test::HasFailure()) return;
        }
      }
      // A bad seed on one rank fails both, on either path, and the sampler goes on.
      sample_options o{{4, 2}};
      std::vector<std::int64_t> bad = {1, rank == 1 ? -3 : 2};
      try {
        gpu_sample(sampler, bad, o, device, stream.get());
        ADD_FAILURE() << lc.name << ": no error for the bad seed";
      } catch (const wm::logic_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(rank == 1 ? "-3" : "another rank"), std::string::npos) << msg;
      }
      std::vector<std::int64_t> fine = {2, 3, 4};
      expect_same(gpu_sample(sampler, fine, o, device, stream.get()),
                  reference_sample(*lc.hg, fine, o), std::string(lc.name) + " after the error");
    }
  });
}

// A WHOLESTORE_SAMPLE_BY_OWNER that is neither 0 nor 1 on one rank fails the first call on
// both ranks, naming the variable (never one rank waiting in a collective); once corrected,
// the next call samples.
TEST_P(GpuSamplingDistributed, BadOwnerSettingFailsOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const wm::memory_location loc = GetParam();
  run_on_gpus(2, [loc](std::shared_ptr<wm::bootstrap> bs) {
    const int rank = bs->rank();
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", rank == 1 ? "yes" : "1", 1);
    const int device = start_device(bs);
    auto comm = wm::make_nccl_communicator(bs, device);
    const host_csr hg = test_graph(1000, 8000, 3);
    csr_graph g = make_graph(comm, hg, wm::memory_type::distributed, loc);
    cuda_stream stream;
    gpu_sampler sampler(g);
    const sample_options o{{4, 3}};
    const std::vector<std::int64_t> seeds = {5 + rank, 600 + rank};
    try {
      gpu_sample(sampler, seeds, o, device, stream.get());
      ADD_FAILURE() << "no error for WHOLESTORE_SAMPLE_BY_OWNER=yes on rank 1";
    } catch (const wm::logic_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("WHOLESTORE_SAMPLE_BY_OWNER"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      if (rank == 1) {
        EXPECT_NE(msg.find("'yes'"), std::string::npos) << msg;
      }
    }
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", "1", 1);
    expect_same(gpu_sample(sampler, seeds, o, device, stream.get()), reference_sample(hg, seeds, o),
                "after the setting was corrected");
    EXPECT_TRUE(sampler.served_by_owners());
  });
}

// A WHOLESTORE_SAMPLE_PAD_KIB that differs between the ranks, or is not a whole number, fails
// the first call on both ranks, naming the variable (the ranks would size their exchanges
// differently); once corrected, the next call samples.
TEST_P(GpuSamplingDistributed, MismatchedPadSettingFailsOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const wm::memory_location loc = GetParam();
  run_on_gpus(2, [loc](std::shared_ptr<wm::bootstrap> bs) {
    const int rank = bs->rank();
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", "1", 1);
    const int device = start_device(bs);
    auto comm = wm::make_nccl_communicator(bs, device);
    const host_csr hg = test_graph(1000, 8000, 3);
    csr_graph g = make_graph(comm, hg, wm::memory_type::distributed, loc);
    cuda_stream stream;
    const sample_options o{{4, 3, 2}};
    const std::vector<std::int64_t> seeds = {5 + rank, 600 + rank};
    for (const char* other : {"64", "-1", "1e3", ""}) {
      SCOPED_TRACE(std::string("rank 1: '") + other + "'");
      ::setenv("WHOLESTORE_SAMPLE_PAD_KIB", rank == 1 ? other : "32", 1);
      gpu_sampler sampler(g);
      try {
        gpu_sample(sampler, seeds, o, device, stream.get());
        ADD_FAILURE() << "no error for WHOLESTORE_SAMPLE_PAD_KIB='" << other << "' on rank 1";
      } catch (const wm::logic_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("WHOLESTORE_SAMPLE_PAD_KIB"), std::string::npos) << msg;
        EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      }
    }
    ::setenv("WHOLESTORE_SAMPLE_PAD_KIB", "32", 1);
    gpu_sampler sampler(g);
    expect_same(gpu_sample(sampler, seeds, o, device, stream.get()), reference_sample(hg, seeds, o),
                "after the setting was corrected");
    EXPECT_TRUE(sampler.served_by_owners());
    EXPECT_EQ(sampler.padded_hops(), 2u);
    ::unsetenv("WHOLESTORE_SAMPLE_PAD_KIB");
  });
}

TEST_P(GpuSamplingDistributed, TwoRanksMatchTheReference) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const wm::memory_location loc = GetParam();
  // Served by the owners (WHOLESTORE_SAMPLE_BY_OWNER=1) with the hops after the first sized by
  // bounds (WHOLESTORE_SAMPLE_PAD_KIB unset), every hop counted first (=0), a limit so small
  // that padded and counted hops alternate (=16: a call of fanouts {1, 1, 1, 1} pads hops 1
  // and 2 and counts hop 3, {15, 10, 5} counts every hop); served when unset (the default);
  // and through the gathers (=0).
  struct mode {
    const char* owners;
    const char* pad;
  };
  for (const mode md : {mode{"1", nullptr}, mode{"1", "0"}, mode{"1", "16"}, mode{nullptr, nullptr},
                        mode{"0", nullptr}}) {
    const std::string owners = md.owners != nullptr ? md.owners : "unset";
    const std::string pad = md.pad != nullptr ? md.pad : "unset";
    SCOPED_TRACE("WHOLESTORE_SAMPLE_BY_OWNER " + owners + ", WHOLESTORE_SAMPLE_PAD_KIB " + pad);
    run_on_gpus(2, [loc, md, owners, pad](std::shared_ptr<wm::bootstrap> bs) {
      auto set = [](const char* name, const char* value) {
        if (value == nullptr) {
          ::unsetenv(name);
        } else {
          ::setenv(name, value, 1);
        }
      };
      set("WHOLESTORE_SAMPLE_BY_OWNER", md.owners);
      set("WHOLESTORE_SAMPLE_PAD_KIB", md.pad);
      const int device = start_device(bs);
      auto comm = wm::make_nccl_communicator(bs, device);
      host_csr hg = test_graph(3000, 40000, 21);
      csr_graph g = make_graph(comm, hg, wm::memory_type::distributed, loc);
      cuda_stream stream;
      gpu_sampler sampler(g);
      const int rank = bs->rank();
      std::uint64_t rs = 9;
      for (sample_method m : methods) {
        for (const auto& f : fanout_sets) {
          sample_options o{f};
          o.method = m;
          // Every rank its own random seed: an owner draws with the seed of the rank that asked.
          o.random_seed = rs++ + 7919 * static_cast<std::uint64_t>(rank);
          o.edge_ids = (rs % 2) == 0;
          // Rank 1 sometimes has an empty batch: the calls stay collective.
          std::size_t n = (rank == 1 && rs % 3 == 0) ? 0 : 40 + 13 * rank;
          auto seeds = test_seeds(hg, n, rs * 7 + rank);
          auto got = gpu_sample(sampler, seeds, o, device, stream.get());
          const std::string what = describe(wm::memory_type::distributed, loc, m, f, o.edge_ids) +
                                   " rank " + std::to_string(rank);
          expect_same(got, reference_sample(hg, seeds, o), what);
          check_properties(hg, got, o, what);
        }
      }
      const bool served = owners != "0";
      EXPECT_EQ(sampler.served_by_owners(), served);
      // Padded hops ran unless switched off or without served hops; the small limit pads
      // some hops and counts others.
      if (served && pad != "0") {
        EXPECT_GT(sampler.padded_hops(), 0u);
      } else {
        EXPECT_EQ(sampler.padded_hops(), 0u);
      }
      // Hubs on the block paths of weighted hops (their weights on rank 0, or gathered from
      // both ranks); both ranks ask for the same hubs, and in the last case for nodes of rank
      // 1 only, so that rank 0, which holds the hubs, serves nothing in the first hop.
      const host_csr hubs = hub_graph();
      csr_graph hg2 = make_graph(comm, hubs, wm::memory_type::distributed, loc);
      gpu_sampler hub_sampler(hg2);
      struct hub_case {
        std::vector<int> fanouts;
        std::vector<std::int64_t> seeds;
      };
      for (const hub_case& hc : {hub_case{{5, 10}, {rank, 2 + rank, 100 + rank}},
                                 hub_case{{35, 3}, {rank, 2 + rank, 100 + rank}},
                                 hub_case{{3, 35}, {2000 + rank, 2500 + rank}}}) {
        sample_options o{hc.fanouts};
        o.method = sample_method::weighted;
        o.random_seed = rs++ + 7919 * static_cast<std::uint64_t>(rank);
        auto got = gpu_sample(hub_sampler, hc.seeds, o, device, stream.get());
        const std::string what =
            describe(wm::memory_type::distributed, loc, o.method, hc.fanouts, false) +
            " hubs, rank " + std::to_string(rank);
        expect_same(got, reference_sample(hubs, hc.seeds, o), what);
      }
      // A bad seed on one rank makes both throw.
      sample_options o{{2}};
      std::vector<std::int64_t> seeds = {1, rank == 0 ? 3000 : 2};
      EXPECT_THROW(gpu_sample(sampler, seeds, o, device, stream.get()), wm::logic_error);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Locations, GpuSamplingDistributed,
                         ::testing::Values(wm::memory_location::device, wm::memory_location::host),
                         [](const ::testing::TestParamInfo<wm::memory_location>& info) {
                           return std::string(wm::memory_location_name(info.param));
                         });

}  // namespace
}  // namespace wholestore_test
