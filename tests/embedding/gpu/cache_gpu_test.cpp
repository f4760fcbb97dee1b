// device_cache on the GPU: lookups through the cache give the table's own lookup bytes for
// every index (cached or not, every output dtype), hit counts equal a direct count, and the
// cache stays coherent under interleaved training steps, raw writes and lookups, with one rank
// and with ranks sharing a GPU.
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <embedding/cache.hpp>
#include <embedding/table.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = wholememory;
namespace emb = wholestore::embedding;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Skewed indices in [0, rows): a cube of a uniform draw, so low rows are hot.
std::vector<std::int64_t> skewed(std::size_t n, std::size_t rows, std::uint64_t seed) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(mix(seed * 7919 + i) >> 11) * 0x1.0p-53;
    v[i] = static_cast<std::int64_t>(std::pow(u, 3.0) * static_cast<double>(rows));
  }
  return v;
}

emb::table make_table(std::shared_ptr<wm::bootstrap> bs, std::size_t rows, std::size_t dim,
                      wm::dtype dt, wm::memory_type type) {
  auto comm = wm::make_host_communicator(std::move(bs));
  emb::table_options o;
  o.rows = rows;
  o.dim = dim;
  o.dtype = dt;
  o.type = type;
  o.location = wm::memory_location::host;
  o.init.method = emb::init_options::normal;
  o.init.seed = 11;
  o.optimizer.kind = emb::optimizer_kind::adam;
  return emb::table::create(comm, o);
}

/// Device copy of a host index list.
wm::device_buffer to_device(const std::vector<std::int64_t>& v, int device) {
  wm::device_buffer b(std::max<std::size_t>(8, v.size() * 8), device);
  if (!v.empty()) WM_CUDA_TRY(copy_and_wait(b.data(), v.data(), v.size() * 8, cudaMemcpyDefault));
  return b;
}

/// Rows `idx` looked up by the table itself and through the cache, as bytes of `out_type`.
std::pair<std::vector<char>, std::vector<char>> both_lookups(emb::table& t, emb::device_cache& c,
                                                             const std::vector<std::int64_t>& idx,
                                                             wm::dtype out_type, int device,
                                                             cudaStream_t stream) {
  const std::size_t bytes = idx.size() * t.dim() * wm::dtype_size(out_type);
  wm::device_buffer d_idx = to_device(idx, device);
  wm::device_buffer a(std::max<std::size_t>(1, bytes), device),
      b(std::max<std::size_t>(1, bytes), device);
  // Different fill bytes: an element a lookup forgets cannot match by accident.
  WM_CUDA_TRY(cudaMemsetAsync(a.data(), 0x11, a.size(), stream));
  WM_CUDA_TRY(cudaMemsetAsync(b.data(), 0x77, b.size(), stream));
  const wm::index_array ia{d_idx.data(), wm::dtype::int64, idx.size()};
  t.lookup(ia, wm::dense_matrix{a.data(), out_type, idx.size(), t.dim(), t.dim()}, stream);
  c.lookup(ia, wm::dense_matrix{b.data(), out_type, idx.size(), t.dim(), t.dim()}, stream);
  std::vector<char> ha(bytes), hb(bytes);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  if (bytes) {
    WM_CUDA_TRY(cudaMemcpy(ha.data(), a.data(), bytes, cudaMemcpyDeviceToHost));
    WM_CUDA_TRY(cudaMemcpy(hb.data(), b.data(), bytes, cudaMemcpyDeviceToHost));
  }
  return {ha, hb};
}

struct cache_case {
  std::size_t dim;
  wm::dtype dtype;
  wm::memory_type type;
};

class DeviceCacheGpu : public ::testing::TestWithParam<cache_case> {};

TEST_P(DeviceCacheGpu, LookupsMatchTheTableAndHitsMatchADirectCount) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const cache_case p = GetParam();
  fork_result r = fork_ranks(1, [&](std::shared_ptr<wm::bootstrap> bs) {
    WM_CUDA_TRY(cudaSetDevice(0));
    cuda_stream stream;
    const std::size_t rows = 2000;
    emb::table t = make_table(bs, rows, p.dim, p.dtype, p.type);
    const auto hot = emb::hottest_rows(skewed(20000, rows, 1), rows, rows / 10);
    emb::device_cache cache(t, hot, 0);
    EXPECT_EQ(cache.capacity(), hot.size());
    const std::set<std::int64_t> cached(hot.begin(), hot.end());
    std::uint64_t want_hits = 0, want_lookups = 0;
    for (wm::dtype out :
         {wm::dtype::float32, wm::dtype::bfloat16, wm::dtype::float16, wm::dtype::float64}) {
      for (std::size_t n : {0u, 1u, 37u, 5000u}) {
        auto idx = skewed(n, rows, n + 3);
        if (n > 1) idx[n - 1] = static_cast<std::int64_t>(rows - 1);  // the last row
        auto [a, b] = both_lookups(t, cache, idx, out, 0, stream.get());
        EXPECT_TRUE(a == b) << n << " indices to " << wm::dtype_name(out);
        for (auto i : idx) want_hits += cached.count(i);
        want_lookups += n;
      }
    }
    const emb::cache_stats s = cache.stats(stream.get());
    EXPECT_EQ(s.lookups, want_lookups);
    EXPECT_EQ(s.hits, want_hits);
    // The 10% hottest rows of a cubed-uniform stream are about the lowest 10%: an index
    // u^3 * rows falls there with probability 0.1^(1/3) = 0.464.
    EXPECT_NEAR(s.hit_rate(), 0.464, 0.05) << "a 10% cache of a cubed-uniform stream";
  });
  EXPECT_TRUE(r.all_ok());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DeviceCacheGpu,
    ::testing::Values(cache_case{1, wm::dtype::float32, wm::memory_type::continuous},
                      cache_case{33, wm::dtype::bfloat16, wm::memory_type::chunked},
                      cache_case{100, wm::dtype::float16, wm::memory_type::continuous},
                      cache_case{128, wm::dtype::float32, wm::memory_type::chunked}),
    [](const ::testing::TestParamInfo<cache_case>& info) {
      return "d" + std::to_string(info.param.dim) + "_" + wm::dtype_name(info.param.dtype) + "_" +
             wm::memory_type_name(info.param.type);
    });

TEST(DeviceCacheGpuErrors, BadIndexIsNamedAndOutputUntouched) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(1, [](std::shared_ptr<wm::bootstrap> bs) {
    WM_CUDA_TRY(cudaSetDevice(0));
    cuda_stream stream;
    emb::table t = make_table(bs, 100, 8, wm::dtype::float32, wm::memory_type::continuous);
    emb::device_cache cache(t, {1, 2, 3}, 0);
    const std::vector<std::int64_t> idx = {5, 1, 100, 7, -1};
    wm::device_buffer d_idx = to_device(idx, 0), out(idx.size() * 8 * 4, 0);
    WM_CUDA_TRY(cudaMemset(out.data(), 0x5a, out.size()));
    try {
      cache.lookup(wm::index_array{d_idx.data(), wm::dtype::int64, idx.size()},
                   wm::dense_matrix{out.data(), wm::dtype::float32, idx.size(), 8, 8},
                   stream.get());
      ADD_FAILURE() << "accepted an index outside the table";
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("index 100 at position 2"), std::string::npos)
          << e.what();
    }
    std::vector<unsigned char> host(out.size());
    WM_CUDA_TRY(cudaMemcpy(host.data(), out.data(), out.size(), cudaMemcpyDeviceToHost));
    for (unsigned char c : host) ASSERT_EQ(c, 0x5a) << "the output was written";
    EXPECT_THROW(emb::device_cache(t, {1, 1}, 0), wm::logic_error);  // repeated row
    EXPECT_THROW(emb::device_cache(t, {100}, 0), wm::logic_error);   // outside
  });
  EXPECT_TRUE(r.all_ok());
}

TEST(DeviceCacheGpuErrors, DistributedTableIsRefused) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(1, [](std::shared_ptr<wm::bootstrap> bs) {
    WM_CUDA_TRY(cudaSetDevice(0));
    emb::table t = make_table(bs, 100, 8, wm::dtype::float32, wm::memory_type::distributed);
    EXPECT_THROW(emb::device_cache(t, {1}, 0), wm::logic_error);
  });
  EXPECT_TRUE(r.all_ok());
}

/// Training through the cache on `ranks` ranks sharing GPU 0: after every step, raw write and
/// flush, a lookup of every row through each rank's cache equals the table's own lookup.
void coherence_body(std::shared_ptr<wm::bootstrap> bs) {
  WM_CUDA_TRY(cudaSetDevice(0));
  cuda_stream stream;
  const std::size_t rows = 500, dim = 40;
  emb::table t = make_table(bs, rows, dim, wm::dtype::bfloat16, wm::memory_type::continuous);
  const int rank = t.comm().rank();
  emb::device_cache cache(t, emb::hottest_rows(skewed(5000, rows, 9 + rank), rows, 60), 0);
  std::vector<std::int64_t> all(rows);
  for (std::size_t i = 0; i < rows; ++i) all[i] = static_cast<std::int64_t>(i);
  for (int step = 0; step < 4; ++step) {
    const auto idx = skewed(300, rows, 100 * step + rank);
    std::vector<float> grads(idx.size() * dim);
    for (std::size_t i = 0; i < grads.size(); ++i)
      grads[i] =
          static_cast<float>(static_cast<double>(mix(step * 31 + i) >> 11) * 0x1.0p-53 - 0.5);
    wm::device_buffer d_idx = to_device(idx, 0), d_g(grads.size() * 4, 0);
    WM_CUDA_TRY(copy_and_wait(d_g.data(), grads.data(), grads.size() * 4, cudaMemcpyDefault));
    const wm::index_array ia{d_idx.data(), wm::dtype::int64, idx.size()};
    cache.apply_gradients(ia,
                          wm::dense_matrix{d_g.data(), wm::dtype::float32, idx.size(), dim, dim},
                          0.1f, stream.get());
    if (step == 2 && rank == 0) {
      // Raw writes of a few rows through the cache (one rank; the others flush below).
      cache.scatter_rows(wm::index_array{d_idx.data(), wm::dtype::int64, 10},
                         wm::dense_matrix{d_g.data(), wm::dtype::float32, 10, dim, dim},
                         stream.get());
    }
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    t.comm().get_bootstrap().barrier();
    if (step == 2) cache.flush(stream.get());
    auto [a, b] = both_lookups(t, cache, all, wm::dtype::float32, 0, stream.get());
    ASSERT_TRUE(a == b) << "rank " << rank << " step " << step << ": the cache is stale";
    t.comm().get_bootstrap().barrier();
  }
}

TEST(DeviceCacheGpuCoherence, TrainingThroughTheCacheOneRank) {
  WHOLESTORE_REQUIRE_GPUS(1);
  EXPECT_TRUE(fork_ranks(1, coherence_body).all_ok());
}

TEST(DeviceCacheGpuCoherence, TrainingThroughTheCacheTwoRanksSharingAGpu) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(2, coherence_body);
  for (std::size_t p = 0; p < r.status.size(); ++p) EXPECT_EQ(r.status[p], 0) << "rank " << p;
}

}  // namespace
}  // namespace wholestore_test
