// gpu_window_pairs against window_pairs_host (walk_pairs_test.cpp checks that against the slot
// rules): the same pairs and negatives in the same order, bit for bit, for walks with dead ends,
// ranges that start and end inside walks, K = 0 and 5, and the shape changing between calls
// (the slot table is rebuilt).  edge_pairs (LINE) against the rule computed here from the host
// CSR, on an R-MAT graph with many empty rows.  Bodies run in a forked child
// (gpu_test_util.hpp).
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/block_pairs.hpp>
#include <graph/csr_graph.hpp>
#include <graph/detail/sample_select.hpp>
#include <graph/generate.hpp>
#include <graph/walk_pairs.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
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

// LINE's pairs: slot s's edge by the documented draw, its source row, its target and the slot's
// negatives, for every memory type the GPU path reads and both locations; a distributed graph
// is refused.
TEST(GpuEdgePairs, EqualToTheRuleOnTheHostCsr) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(1, [](std::shared_ptr<wm::bootstrap> bs) {
    wm::set_device(0);
    auto comm = wm::make_host_communicator(bs);
    generate_options go;
    go.num_nodes = 3000;  // R-MAT leaves many rows empty, also first and last ones
    go.num_edges = 20000;
    go.seed = 9;
    const host_csr g = generate_graph(go);
    std::vector<std::int64_t> source(g.num_edges());
    for (std::uint64_t u = 0; u < g.num_nodes; ++u)
      for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e)
        source[static_cast<std::size_t>(e)] = static_cast<std::int64_t>(u);
    cuda_stream stream;
    const std::uint64_t key = 0x1234abcdull, lo = 777, hi = 777 + 50001;
    const std::size_t n = hi - lo;
    for (int k : {0, 5}) {
      std::vector<std::int64_t> neg(n * k);
      for (std::size_t i = 0; i < neg.size(); ++i) neg[i] = static_cast<std::int64_t>(i * 7 + 1);
      std::vector<std::int64_t> c(n), t(n * (k + 1));
      for (std::size_t x = 0; x < n; ++x) {
        const auto e = detail::rand_below(detail::draw(key, lo + x), g.num_edges());
        c[x] = source[e];
        t[x * (k + 1)] = g.col_indices[e];
        for (int q = 0; q < k; ++q) t[x * (k + 1) + 1 + q] = neg[x * k + q];
      }
      device_buffer d_neg(neg.size() * 8 + 8, 0), d_c(n * 8, 0), d_t(t.size() * 8, 0);
      if (!neg.empty())
        WM_CUDA_TRY(copy_and_wait(d_neg.get(), neg.data(), neg.size() * 8, cudaMemcpyHostToDevice));
      edge_pairs_args a;
      a.key = key;
      a.lo = lo;
      a.hi = hi;
      a.negatives = static_cast<const std::int64_t*>(d_neg.get());
      a.negatives_per_pair = k;
      a.centers = static_cast<std::int64_t*>(d_c.get());
      a.targets = static_cast<std::int64_t*>(d_t.get());
      for (auto type : {wm::memory_type::continuous, wm::memory_type::chunked})
        for (auto loc : {wm::memory_location::device, wm::memory_location::host}) {
          const csr_graph wg = make_graph(comm, g, type, loc);
          const std::string what = std::string(wm::memory_type_name(type)) + " " +
                                   wm::memory_location_name(loc) + ", K " + std::to_string(k);
          WM_CUDA_TRY(cudaMemset(d_c.get(), 0xff, n * 8));
          edge_pairs(wg, a, stream.get());
          WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
          std::vector<std::int64_t> gc(n), gt(t.size());
          WM_CUDA_TRY(copy_and_wait(gc.data(), d_c.get(), n * 8, cudaMemcpyDeviceToHost));
          WM_CUDA_TRY(copy_and_wait(gt.data(), d_t.get(), gt.size() * 8, cudaMemcpyDeviceToHost));
          EXPECT_EQ(gc, c) << what;
          EXPECT_EQ(gt, t) << what;
        }
    }
    const csr_graph dist =
        make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    EXPECT_THROW(edge_pairs(dist, edge_pairs_args{}, stream.get()), wm::logic_error);
  });
  EXPECT_EQ(r.status[0], 0) << "the child failed";
}

// gpu_block_pairs against block_pairs_host (block_pairs_test.cpp checks that against the rules):
// the same rows in the same order (the negatives drawn from partition tables in device memory)
// and the same counts, for 1, 4 and 13 partitions, K = 0 and
// 5, a call larger than the last (the scratch grows), an empty call; a bad id is named.
TEST(GpuBlockPairs, EqualToTheCpuPath) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(1, [](std::shared_ptr<wm::bootstrap>) {
    wm::set_device(0);
    cuda_stream stream;
    gpu_block_pairs builder;
    const std::uint64_t nodes = 100003;
    for (std::size_t n : {std::size_t{1000}, std::size_t{200001}, std::size_t{0}})
      for (int parts : {1, 4, 13})
        for (int k : {0, 5}) {
          const std::size_t per = static_cast<std::size_t>(k) + 1;
          std::vector<std::int64_t> c(n), t(n * per);
          for (std::size_t i = 0; i < n; ++i) c[i] = static_cast<std::int64_t>((i * 7919) % nodes);
          for (std::size_t i = 0; i < t.size(); ++i)
            t[i] = static_cast<std::int64_t>((i * 104729 + 17) % nodes);
          block_pairs_args a;
          a.layout = {nodes, parts};
          a.pairs = n;
          a.negatives_per_pair = k;
          std::vector<std::int64_t> oc(n), ot(n * per);
          std::vector<std::uint64_t> counts(static_cast<std::size_t>(parts * parts)),
              gcounts(counts.size());
          a.centers = c.data();
          a.targets = t.data();
          a.out_centers = oc.data();
          a.out_targets = ot.data();
          a.counts = counts.data();
          // Alias tables that keep half the buckets and send the rest to the next row.
          std::vector<std::vector<alias_entry>> tables;
          std::vector<const alias_entry*> host_tables;
          std::vector<device_buffer> device_tables;
          std::vector<const alias_entry*> device_pointers;
          for (int c = 0; c < parts; ++c) {
            const std::uint64_t rows = a.layout.rows(c);
            std::vector<alias_entry> t(rows);
            for (std::uint64_t b = 0; b < rows; ++b)
              t[b] = {b % 3 ? std::uint64_t{1} << 31 : std::uint64_t{1} << 32,
                      static_cast<std::int64_t>((b + 1) % rows)};
            device_tables.emplace_back(rows * sizeof(alias_entry), 0);
            WM_CUDA_TRY(copy_and_wait(device_tables.back().get(), t.data(),
                                      rows * sizeof(alias_entry), cudaMemcpyHostToDevice));
            device_pointers.push_back(static_cast<const alias_entry*>(device_tables.back().get()));
            tables.push_back(std::move(t));
            host_tables.push_back(tables.back().data());
          }
          device_buffer d_pointers(parts * sizeof(void*), 0);
          WM_CUDA_TRY(copy_and_wait(d_pointers.get(), device_pointers.data(), parts * sizeof(void*),
                                    cudaMemcpyHostToDevice));
          a.tables = host_tables.data();
          a.negative_key = 77;
          block_pairs_host(a);
          device_buffer d_c(c.size() * 8 + 8, 0), d_t(t.size() * 8 + 8, 0),
              d_oc(c.size() * 8 + 8, 0), d_ot(t.size() * 8 + 8, 0);
          if (n) {
            WM_CUDA_TRY(copy_and_wait(d_c.get(), c.data(), c.size() * 8, cudaMemcpyHostToDevice));
            WM_CUDA_TRY(copy_and_wait(d_t.get(), t.data(), t.size() * 8, cudaMemcpyHostToDevice));
          }
          a.centers = static_cast<const std::int64_t*>(d_c.get());
          a.targets = static_cast<const std::int64_t*>(d_t.get());
          a.out_centers = static_cast<std::int64_t*>(d_oc.get());
          a.out_targets = static_cast<std::int64_t*>(d_ot.get());
          a.counts = gcounts.data();
          a.tables = static_cast<const alias_entry* const*>(d_pointers.get());
          builder.build(a, stream.get());
          std::vector<std::int64_t> goc(n), got(n * per);
          if (n) {
            WM_CUDA_TRY(copy_and_wait(goc.data(), d_oc.get(), n * 8, cudaMemcpyDeviceToHost));
            WM_CUDA_TRY(
                copy_and_wait(got.data(), d_ot.get(), got.size() * 8, cudaMemcpyDeviceToHost));
          }
          EXPECT_EQ(gcounts, counts) << n << " pairs, " << parts << " partitions, K " << k;
          EXPECT_EQ(goc, oc) << n << " pairs, " << parts << " partitions, K " << k;
          EXPECT_EQ(got, ot) << n << " pairs, " << parts << " partitions, K " << k;
          if (n == 1000 && parts == 4 && k == 5) {  // a bad target: named, by position
            t[4 * per + 2] = static_cast<std::int64_t>(nodes);
            WM_CUDA_TRY(copy_and_wait(d_t.get(), t.data(), t.size() * 8, cudaMemcpyHostToDevice));
            std::string message;
            try {
              builder.build(a, stream.get());
            } catch (const wm::logic_error& e) {
              message = e.what();
            }
            EXPECT_NE(message.find("the id at position 26 of the targets is outside [0, 100003)"),
                      std::string::npos)
                << message;
          }
        }
  });
  EXPECT_EQ(r.status[0], 0) << "the child failed";
}

}  // namespace
}  // namespace wholestore_test
