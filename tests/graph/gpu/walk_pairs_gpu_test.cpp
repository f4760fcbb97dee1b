// gpu_window_pairs against window_pairs_host (walk_pairs_test.cpp checks that against the slot
// rules): the same pairs and negatives in the same order, bit for bit, for walks with dead ends,
// ranges that start and end inside walks, K = 0 and 5, and the shape changing between calls
// (the slot table is rebuilt).  The body runs in a forked child (gpu_test_util.hpp).
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/walk_pairs.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
namespace wm = ::wholememory;

TEST(GpuWindowPairs, EqualToTheCpuPath) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(1, [](std::shared_ptr<wm::bootstrap>) {
    wm::set_device(0);
    cuda_stream stream;
    gpu_window_pairs builder;
    for (int length : {20, 5, 20})
      for (int window : {3, 1})
        for (int k : {0, 5}) {
          const std::size_t count = 3001;
          const std::size_t row = length + 1;
          std::vector<std::int64_t> walks(count * row);
          for (std::size_t v = 0; v < count; ++v)
            for (std::size_t i = 0; i < row; ++i)
              walks[v * row + i] =
                  i <= (v * 7) % row ? static_cast<std::int64_t>((v * 31 + i * 17) % 9973) : -1;
          const std::uint64_t s = window_slots(length, window);
          const std::uint64_t first = 1000;  // the walks are walks 1000 .. 4000 of the job
          const std::uint64_t lo = first * s + s / 2, hi = (first + count) * s - s / 3;
          std::vector<std::int64_t> neg((hi - lo) * k);
          for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = static_cast<std::int64_t>(i * 3);
          window_pairs_args a;
          a.first_walk = first;
          a.walk_count = count;
          a.walk_length = length;
          a.window = window;
          a.lo = lo;
          a.hi = hi;
          a.negatives_per_pair = k;
          std::vector<std::int64_t> c(hi - lo), t((hi - lo) * (k + 1));
          a.walks = walks.data();
          a.negatives = neg.data();
          a.centers = c.data();
          a.targets = t.data();
          const std::size_t n = window_pairs_host(a);
          device_buffer d_walks(walks.size() * 8, 0), d_neg(neg.size() * 8 + 8, 0),
              d_c(c.size() * 8, 0), d_t(t.size() * 8, 0);
          WM_CUDA_TRY(
              copy_and_wait(d_walks.get(), walks.data(), walks.size() * 8, cudaMemcpyHostToDevice));
          if (!neg.empty())
            WM_CUDA_TRY(
                copy_and_wait(d_neg.get(), neg.data(), neg.size() * 8, cudaMemcpyHostToDevice));
          a.walks = static_cast<const std::int64_t*>(d_walks.get());
          a.negatives = static_cast<const std::int64_t*>(d_neg.get());
          a.centers = static_cast<std::int64_t*>(d_c.get());
          a.targets = static_cast<std::int64_t*>(d_t.get());
          ASSERT_EQ(builder.build(a, stream.get()), n) << length << " " << window << " " << k;
          std::vector<std::int64_t> gc(n), gt(n * (k + 1));
          WM_CUDA_TRY(copy_and_wait(gc.data(), d_c.get(), n * 8, cudaMemcpyDeviceToHost));
          WM_CUDA_TRY(copy_and_wait(gt.data(), d_t.get(), gt.size() * 8, cudaMemcpyDeviceToHost));
          c.resize(n);
          t.resize(n * (k + 1));
          EXPECT_EQ(gc, c) << length << " " << window << " " << k;
          EXPECT_EQ(gt, t) << length << " " << window << " " << k;
        }
  });
  EXPECT_EQ(r.status[0], 0) << "the child failed";
}

}  // namespace
}  // namespace wholestore_test
