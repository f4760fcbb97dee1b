// The sampling epoch runner (train/sample_runner.hpp) on small generated graphs, ranks as
// threads: the per-rank split covers every seed exactly once in batches of batch_size; the
// shuffle is a permutation per epoch; on 1 and 2 ranks, in continuous and distributed memory,
// the sampled edges, batches, seeds and gathered rows equal a count the test makes itself from
// graph::sample_host calls on the batches the header documents; distributed memory pads the
// ranks to equal call counts; random batches skip their warm-up; bad options throw.
#include "common/multiprocess.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/random.hpp>
#include <graph/sampling.hpp>
#include <train/sample_runner.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace {

using namespace wholestore::train;
namespace wg = wholestore::graph;
namespace wm = wholememory;

const wg::host_csr& small_graph() {
  static const wg::host_csr host = [] {
    wg::generate_options go;
    go.num_nodes = 1001;  // splits unevenly over 2 ranks and batch sizes
    go.num_edges = 12000;
    go.feature_dim = 5;  // 20-byte rows: not a multiple of 16 bytes
    go.with_weights = true;
    go.seed = 7;
    go.rmat = true;
    return wg::generate_graph(go);
  }();
  return host;
}

sample_run_options small_options() {
  sample_run_options o;
  o.fanouts = {4, 3};
  o.batch_size = 97;
  o.epochs = 2;
  o.random_seed = 5;
  o.threads = 2;
  return o;
}

// The figures a run must give, counted by the test: the documented batches of every rank,
// sampled with graph::sample_host on a one-rank copy of the graph.
struct expected_figures {
  std::uint64_t batches = 0, seeds = 0, edges = 0, rows = 0;
};

void add_batch(const wg::csr_graph& g, const std::int64_t* seeds, std::size_t count,
               const wg::sample_options& so, expected_figures& e) {
  const wg::sample_result r = wg::sample_host(g, seeds, count, so, 1);
  ++e.batches;
  e.seeds += count;
  for (const auto& blk : r.blocks) e.edges += static_cast<std::uint64_t>(blk.num_edges());
  e.rows += r.blocks.empty() ? 0 : r.input_nodes().size();
}

expected_figures expected_for(const sample_run_options& o, int ranks) {
  expected_figures e;
  wholestore_test::thread_ranks(1, [&](std::shared_ptr<wm::bootstrap> bs) {
    wg::csr_graph g = wg::make_graph(wm::make_host_communicator(bs), small_graph(),
                                     wm::memory_type::continuous, wm::memory_location::host);
    const std::uint64_t n = g.num_nodes;
    wg::sample_options so;
    so.fanouts = o.fanouts;
    so.method = o.method;
    for (std::uint64_t epoch = 0; epoch < o.epochs; ++epoch) {
      if (o.order == seed_order::shuffled_epochs) {
        const std::vector<std::int64_t> order = shuffled_seeds(n, o.random_seed, epoch);
        so.random_seed = wg::mix64(o.random_seed ^ wg::mix64(epoch));
        for (std::uint64_t r = 0; r < static_cast<std::uint64_t>(ranks); ++r) {
          const std::uint64_t first = n * r / ranks, last = n * (r + 1) / ranks;
          std::uint64_t taken = 0;
          for (std::uint64_t b = first; b < last; b += o.batch_size) {
            if (o.batches > 0 && taken++ == o.batches) break;
            add_batch(g, order.data() + b, std::min(o.batch_size, last - b), so, e);
          }
        }
      } else {
        for (std::uint64_t b = o.warmup_batches; b < o.warmup_batches + o.batches; ++b) {
          for (std::uint64_t r = 0; r < static_cast<std::uint64_t>(ranks); ++r) {
            const std::uint64_t id = (epoch * o.batches + b) * ranks + r;
            std::vector<std::int64_t> seeds(o.batch_size);
            for (std::size_t i = 0; i < seeds.size(); ++i)
              seeds[i] = static_cast<std::int64_t>(
                  wg::mix64(o.random_seed ^ wg::mix64(id * o.batch_size + i)) % n);
            so.random_seed = wg::mix64(o.random_seed + id);
            add_batch(g, seeds.data(), seeds.size(), so, e);
          }
        }
      }
    }
  });
  return e;
}

// Runs on `ranks` thread ranks with the graph in `type`; returns every rank's result.
std::vector<sample_run_result> run_ranks(int ranks, const sample_run_options& o,
                                         wm::memory_type type, std::uint64_t* progress_calls) {
  std::vector<sample_run_result> out(static_cast<std::size_t>(ranks));
  std::mutex m;
  wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
    const int rank = bs->rank();
    wg::csr_graph g = wg::make_graph(wm::make_host_communicator(bs), small_graph(), type,
                                     wm::memory_location::host);
    std::uint64_t calls = 0, last_total = 0;
    sample_run_result r = run_sampling(bs, g, o, [&](std::uint64_t done, std::uint64_t total) {
      EXPECT_EQ(done, calls + 1);
      ++calls;
      last_total = total;
    });
    EXPECT_EQ(calls, last_total);
    std::lock_guard<std::mutex> lock(m);
    if (rank == 0 && progress_calls) *progress_calls = calls;
    out[static_cast<std::size_t>(rank)] = r;
  });
  return out;
}

void expect_figures(const std::vector<sample_run_result>& runs, const expected_figures& e,
                    std::uint64_t row_bytes) {
  for (const auto& r : runs) {
    EXPECT_EQ(r.total.batches, e.batches);
    EXPECT_EQ(r.total.seeds, e.seeds);
    EXPECT_EQ(r.total.sampled_edges, e.edges);
    EXPECT_EQ(r.total.gathered_rows, row_bytes ? e.rows : 0);  // 0: no gathering
    EXPECT_EQ(r.total.gathered_bytes, e.rows * row_bytes);
  }
  std::uint64_t edges = 0;
  for (const auto& r : runs) edges += r.rank.sampled_edges;
  EXPECT_EQ(edges, e.edges);
}

TEST(SampleRunner, SplitCoversEverySeedOnceInBatches) {
  for (std::uint64_t n : {0ull, 1ull, 7ull, 10ull, 1000ull, 1001ull}) {
    for (int ranks : {1, 2, 3, 8}) {
      for (std::uint64_t batch : {1ull, 3ull, 64ull}) {
        std::vector<int> seen(n, 0);
        std::uint64_t next = 0;
        for (int r = 0; r < ranks; ++r) {
          const seed_split s = split_seeds(n, r, ranks, batch);
          EXPECT_EQ(s.first, next) << n << " seeds, rank " << r << " of " << ranks;
          next = s.last;
          for (std::uint64_t i = s.first; i < s.last; ++i) ++seen[i];
          EXPECT_EQ(s.local_batches, (s.last - s.first + batch - 1) / batch);
          // Chunks differ by at most one seed, so batch counts by at most one.
          EXPECT_LE(s.last - s.first, n / ranks + 1);
          EXPECT_EQ(split_seeds(n, r, ranks, batch, 1).local_batches,
                    std::min<std::uint64_t>(1, s.local_batches));
        }
        EXPECT_EQ(next, n);
        EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      }
    }
  }
  EXPECT_THROW(split_seeds(10, 2, 2, 1), wm::logic_error);
  EXPECT_THROW(split_seeds(10, 0, 1, 0), wm::logic_error);
}

TEST(SampleRunner, ShuffleIsAPermutationPerEpoch) {
  const std::vector<std::int64_t> a = shuffled_seeds(1000, 3, 0), b = shuffled_seeds(1000, 3, 1);
  std::vector<std::int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], static_cast<int>(i));
  EXPECT_NE(a, b);
  EXPECT_EQ(a, shuffled_seeds(1000, 3, 0));
  EXPECT_TRUE(shuffled_seeds(0, 3, 0).empty());
}

class SampleRunnerRanks : public ::testing::TestWithParam<int> {};

TEST_P(SampleRunnerRanks, ShuffledEpochsMatchDirectSampleCalls) {
  const int ranks = GetParam();
  for (wm::memory_type type : {wm::memory_type::continuous, wm::memory_type::distributed}) {
    SCOPED_TRACE(wm::memory_type_name(type));
    sample_run_options o = small_options();
    const expected_figures e = expected_for(o, ranks);
    EXPECT_EQ(e.seeds, small_graph().num_nodes * o.epochs);
    std::uint64_t calls = 0;
    const auto runs = run_ranks(ranks, o, type, &calls);
    expect_figures(runs, e, 5 * sizeof(float));
    for (const auto& r : runs) {
      // Distributed memory: every rank makes the most of any rank's calls.
      EXPECT_EQ(r.calls_per_epoch, type == wm::memory_type::distributed ? runs[0].calls_per_epoch
                                                                        : r.split.local_batches);
      EXPECT_GE(r.calls_per_epoch, r.split.local_batches);
    }
    EXPECT_EQ(calls, runs[0].calls_per_epoch * o.epochs);

    o.batches = 2;  // at most two batches per rank per epoch
    o.gather_features = false;
    const auto capped = run_ranks(ranks, o, type, nullptr);
    expect_figures(capped, expected_for(o, ranks), 0);
    EXPECT_EQ(capped[0].total.batches, 2u * ranks * o.epochs);
  }
}

TEST_P(SampleRunnerRanks, RandomBatchesSkipTheirWarmup) {
  const int ranks = GetParam();
  sample_run_options o = small_options();
  o.order = seed_order::random_batches;
  o.method = wg::sample_method::weighted;
  o.batches = 3;
  o.warmup_batches = 2;
  o.gather_features = false;
  const auto runs = run_ranks(ranks, o, wm::memory_type::chunked, nullptr);
  expect_figures(runs, expected_for(o, ranks), 0);
  EXPECT_EQ(runs[0].total.batches, 3u * o.epochs * ranks);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SampleRunnerRanks, ::testing::Values(1, 2));

TEST(SampleRunner, BadOptionsThrow) {
  wholestore_test::thread_ranks(1, [&](std::shared_ptr<wm::bootstrap> bs) {
    wg::csr_graph g = wg::make_graph(wm::make_host_communicator(bs), small_graph(),
                                     wm::memory_type::continuous, wm::memory_location::host);
    sample_runner runner(bs, g);
    sample_run_options o = small_options();
    o.batch_size = 0;
    EXPECT_THROW(runner.run(o), wm::logic_error);
    o = small_options();
    o.epochs = 0;
    EXPECT_THROW(runner.run(o), wm::logic_error);
    o = small_options();
    o.warmup_batches = 1;  // shuffled epochs have no warm-up
    EXPECT_THROW(runner.run(o), wm::logic_error);
    o = small_options();
    o.order = seed_order::random_batches;  // needs batches
    EXPECT_THROW(runner.run(o), wm::logic_error);
#if !defined(WHOLESTORE_HAS_CUDA)
    o = small_options();
    o.use_gpu = true;
    EXPECT_THROW(runner.run(o), wm::logic_error);
#endif
    EXPECT_FALSE(runner.served_by_owners());
  });
}

}  // namespace
