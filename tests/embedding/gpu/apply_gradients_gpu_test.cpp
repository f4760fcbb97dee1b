// apply_gradients on the GPU: bit-identical to the CPU path (itself checked against the
// float64 reference in apply_gradients_test.cpp) for every optimizer, table dtype and dims 1,
// 33, 100; device and host locations, continuous and chunked memory on one rank; two ranks on
// two GPUs over NCCL (every memory type); two ranks sharing GPU 0 over the host communicator
// (the exchange staged through host memory); duplicates summed in global batch order; an
// out-of-range index changes nothing; lookup and scatter_rows on the GPU.
//
// The test process never calls CUDA (a forked child of a process that did could not): devices
// are counted in a short-lived child, and every body runs in forked ranks.
#include "common/gpu_count.hpp"
#include "embedding/embedding_test_util.hpp"

#include <embedding/table.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>

namespace wholestore_test::embed {
namespace {

#define EMBED_REQUIRE_GPUS(n)                                                                   \
  do {                                                                                          \
    const int embed_have_gpus_ = gpu_count();                                                   \
    if (embed_have_gpus_ < (n)) {                                                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s), " << embed_have_gpus_ << " visible"; \
    }                                                                                           \
  } while (0)

/// How the ranks of a test meet: one GPU each over NCCL, or all on GPU 0 over the host
/// communicator.
enum class rank_setup { own_gpu_nccl, shared_gpu_host };

struct gpu_rank {
  std::shared_ptr<wholememory::communicator> comm;
  int device = 0;
  cudaStream_t stream = nullptr;
  gpu_rank() = default;
  gpu_rank(const gpu_rank&) = delete;
  gpu_rank& operator=(const gpu_rank&) = delete;
  ~gpu_rank() {
    if (stream != nullptr) WM_CUDA_WARN(cudaStreamDestroy(stream));
  }
};

using gpu_body = std::function<void(gpu_rank&)>;

void run_gpu_ranks(int ranks, rank_setup setup, const gpu_body& body) {
  fork_result result = fork_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    gpu_rank g;
    g.device = setup == rank_setup::shared_gpu_host ? 0 : bs->rank() % wholememory::device_count();
    wholememory::set_device(g.device);
    WM_CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    g.comm = setup == rank_setup::own_gpu_nccl ? wholememory::make_nccl_communicator(bs, g.device)
                                               : wholememory::make_host_communicator(bs);
    body(g);
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

/// Host bytes copied into a new device buffer.
wholememory::device_buffer to_device(const std::vector<char>& bytes, int device) {
  wholememory::device_buffer b(bytes.size(), device);
  WM_CUDA_TRY(cudaMemcpy(b.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return b;
}

constexpr std::size_t test_rows = 97;
// About 700 / 8 = 87 duplicates for each of the four hot rows: more than the tree's group of 32,
// so the bit-for-bit comparisons cover the multi-warp sums too.
constexpr std::size_t batch_entries = 700;
constexpr int steps = 3;
constexpr float learning_rate = 0.05f;

dtype grad_type_of(int step) {
  static const dtype types[] = {dtype::float32, dtype::float16, dtype::bfloat16};
  return types[step % 3];
}

table_options options_for(optimizer_kind k, dtype t, std::size_t dim, memory_type type,
                          memory_location loc, std::uint64_t seed) {
  table_options o;
  o.rows = test_rows;
  o.dim = dim;
  o.dtype = t;
  o.type = type;
  o.location = loc;
  o.init.method = seed % 3 == 0 ? init_options::normal : init_options::uniform;
  o.init.a = -0.5;
  o.init.b = 0.5;
  o.init.std = 0.2;
  o.init.seed = seed;
  o.optimizer = optimizer_for(k, seed % 2 == 1);
  return o;
}

std::string describe(const table_options& o) {
  return std::string(optimizer_name(o.optimizer.kind)) + " " + wholememory::dtype_name(o.dtype) +
         " dim " + std::to_string(o.dim) + " " + wholememory::memory_type_name(o.type) + " " +
         wholememory::memory_location_name(o.location);
}

/// apply_gradients with entries [first, last) of `b` in device buffers (the index check
/// deferred into device word `deferred` when given); waits for the stream.
void apply_slice_gpu(table& tb, const batch& b, std::size_t first, std::size_t last, dtype it,
                     dtype gt, float lr, const gpu_rank& g,
                     unsigned long long* deferred = nullptr) {
  const std::size_t n = last - first, dim = tb.dim(), stride = dim + 2;
  auto di = to_device(index_bytes(b.index.data() + first, n, it), g.device);
  auto dg = to_device(encode_floats(b.grads.data() + first * dim, n, dim, stride, gt), g.device);
  apply_options options;
  options.deferred_check = deferred;
  tb.apply_gradients(wholememory::index_array{n ? di.data() : nullptr, it, n},
                     wholememory::dense_matrix{n ? dg.data() : nullptr, gt, n, dim, stride}, lr,
                     g.stream, options);
  WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
}

/// A device word for apply_options::deferred_check, set to ~0 (no bad index yet).
struct check_word {
  wholememory::device_buffer word;
  explicit check_word(int device) : word(sizeof(unsigned long long), device) { reset(); }
  unsigned long long* get() { return word.data_as<unsigned long long>(); }
  void reset() { WM_CUDA_TRY(cudaMemset(word.data(), 0xff, sizeof(unsigned long long))); }
  unsigned long long read() const {
    unsigned long long v = 0;
    WM_CUDA_TRY(cudaMemcpy(&v, word.data(), sizeof(v), cudaMemcpyDeviceToHost));
    return v;
  }
};

/// The CPU path on one rank, host memory, whole batches: what every GPU run must equal.
table cpu_baseline(const table_options& o, std::uint64_t seed) {
  table_options solo = o;
  solo.type = memory_type::continuous;
  solo.location = memory_location::host;
  table base = table::create(solo_comm(), solo);
  for (int s = 0; s < steps; ++s) {
    batch b = global_batch(seed, s, batch_entries, o.rows, o.dim);
    const std::size_t n = b.index.size(), stride = o.dim + 2;
    auto ib = index_bytes(b.index.data(), n, dtype::int64);
    auto gb = encode_floats(b.grads.data(), n, o.dim, stride, grad_type_of(s));
    base.apply_gradients_host(
        wholememory::index_array{ib.data(), dtype::int64, n},
        wholememory::dense_matrix{gb.data(), grad_type_of(s), n, o.dim, stride}, learning_rate, 1);
  }
  return base;
}

/// Trains a table of every optimizer x dtype x dim on the GPU path, each rank with its slice of
/// the global batches, and checks its own rows against the CPU baseline bit for bit.
void every_optimizer_matches_the_cpu_path(
    gpu_rank& g, memory_type type, memory_location loc,
    table_options::exchange_kind exchange = table_options::exchange_kind::peer) {
  const int ranks = g.comm->size(), rank = g.comm->rank();
  std::uint64_t seed = 700;
  for (optimizer_kind k : all_optimizers()) {
    for (dtype t : table_dtypes()) {
      for (std::size_t dim : {std::size_t{1}, std::size_t{33}, std::size_t{100}}) {
        table_options o = options_for(k, t, dim, type, loc, ++seed);
        o.exchange = exchange;
        table tb = table::create(g.comm, o);
        for (int s = 0; s < steps; ++s) {
          batch b = global_batch(seed, s, batch_entries, test_rows, dim);
          auto [first, last] = slice(batch_entries, ranks, rank, s);
          apply_slice_gpu(tb, b, first, last, s % 2 ? dtype::int32 : dtype::int64, grad_type_of(s),
                          learning_rate, g);
        }
        table base = cpu_baseline(o, seed);
        const own_content mine = own_content_of(tb);
        const own_content want = rows_of(base, tb.own_rows());
        ASSERT_EQ(mine.step, static_cast<std::uint64_t>(steps));
        ASSERT_EQ(first_difference(mine.weights, want.weights), -1)
            << describe(o) << ": GPU weights differ from the CPU path at byte "
            << first_difference(mine.weights, want.weights) << " of rows " << tb.own_rows().begin
            << ".." << tb.own_rows().end;
        ASSERT_EQ(mine.state.size(), want.state.size());
        for (std::size_t i = 0; i < want.state.size(); ++i)
          ASSERT_EQ(first_difference(mine.state[i], want.state[i]), -1)
              << describe(o) << ": GPU state " << tb.state_names()[i] << " differs at byte "
              << first_difference(mine.state[i], want.state[i]);
      }
    }
  }
}

using one_rank_param = std::tuple<memory_type, memory_location>;
class GpuApplyOneRank : public ::testing::TestWithParam<one_rank_param> {};

using two_rank_param = std::tuple<rank_setup, memory_type, memory_location>;
class GpuApplyTwoRanks : public ::testing::TestWithParam<two_rank_param> {};

}  // namespace

TEST_P(GpuApplyOneRank, EveryOptimizerDtypeAndDimMatchesTheCpuPathBitForBit) {
  EMBED_REQUIRE_GPUS(1);
  auto [type, loc] = GetParam();
  run_gpu_ranks(1, rank_setup::shared_gpu_host, [type = type, loc = loc](gpu_rank& g) {
    every_optimizer_matches_the_cpu_path(g, type, loc);
  });
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndLocations, GpuApplyOneRank,
    ::testing::Combine(::testing::Values(memory_type::continuous, memory_type::chunked),
                       ::testing::Values(memory_location::device, memory_location::host)),
    [](const auto& info) {
      return std::string(wholememory::memory_type_name(std::get<0>(info.param))) + "_" +
             wholememory::memory_location_name(std::get<1>(info.param));
    });

TEST_P(GpuApplyTwoRanks, EveryOptimizerDtypeAndDimMatchesTheCpuPathBitForBit) {
  auto [setup, type, loc] = GetParam();
  EMBED_REQUIRE_GPUS(setup == rank_setup::own_gpu_nccl ? 2 : 1);
  run_gpu_ranks(2, setup, [type = type, loc = loc](gpu_rank& g) {
    every_optimizer_matches_the_cpu_path(g, type, loc);
  });
}

INSTANTIATE_TEST_SUITE_P(
    SetupsTypesLocations, GpuApplyTwoRanks,
    ::testing::Values(
        two_rank_param{rank_setup::own_gpu_nccl, memory_type::continuous, memory_location::device},
        two_rank_param{rank_setup::own_gpu_nccl, memory_type::chunked, memory_location::device},
        two_rank_param{rank_setup::own_gpu_nccl, memory_type::distributed, memory_location::device},
        two_rank_param{rank_setup::own_gpu_nccl, memory_type::chunked, memory_location::host},
        two_rank_param{rank_setup::shared_gpu_host, memory_type::chunked, memory_location::device},
        two_rank_param{rank_setup::shared_gpu_host, memory_type::distributed,
                       memory_location::device},
        two_rank_param{rank_setup::shared_gpu_host, memory_type::continuous,
                       memory_location::host}),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == rank_setup::own_gpu_nccl ? "nccl_2gpus"
                                                                             : "host_sharedgpu") +
             "_" + wholememory::memory_type_name(std::get<1>(info.param)) + "_" +
             wholememory::memory_location_name(std::get<2>(info.param));
    });

TEST(GpuApply, DuplicatesAreSummedLeftToRightInGlobalBatchOrder) {
  EMBED_REQUIRE_GPUS(1);
  // Row 7's gradients in global order: 1e8, 1, -1e8, 1: left to right in float32 the sum is 1
  // (per-rank partial sums would give 0), so SGD at lr 1 from zeros gives -1.  Row 2 appears
  // twice with gradient 1: lr 1 moves it by 2.
  for (int ranks : {1, 2}) {
    run_gpu_ranks(ranks, rank_setup::shared_gpu_host, [](gpu_rank& g) {
      const int n = g.comm->size(), rank = g.comm->rank();
      table_options o;
      o.rows = 10;
      o.dim = 1;
      o.type = memory_type::chunked;
      o.location = memory_location::device;
      o.init.method = init_options::zeros;
      table tb = table::create(g.comm, o);
      const float global[] = {1e8f, 1.0f, -1e8f, 1.0f, 1.0f, 1.0f};
      const std::int64_t rows[] = {7, 7, 7, 7, 2, 2};
      std::vector<std::int64_t> idx;
      std::vector<float> grads;
      for (int i = 0; i < 6; ++i) {
        if ((i % 4) * n / 4 == rank) {
          idx.push_back(rows[i]);
          grads.push_back(global[i]);
        }
      }
      batch b{idx, grads};
      apply_slice_gpu(tb, b, 0, idx.size(), dtype::int64, dtype::float32, 1.0f, g);
      g.comm->barrier(nullptr);
      std::vector<float> all(10);
      for (int p = 0; p < tb.weights_memory().num_parts(); ++p) {
        wholememory::part_info part = tb.weights_memory().part(p);
        if (part.bytes) wholememory::copy_bytes(all.data() + part.offset / 4, part.ptr, part.bytes);
      }
      EXPECT_EQ(all[7], -1.0f);
      EXPECT_EQ(all[2], -2.0f);
      EXPECT_EQ(all[0], 0.0f);
    });
  }
}

TEST(GpuApply, LongRunsOfDuplicatesAreSummedAsTheDocumentedTree) {
  EMBED_REQUIRE_GPUS(1);
  // Runs of 1 to 40000 duplicates (one, two and three tree levels) against the spec's tree
  // written independently in the test util; a plain left-to-right sum would give other bits.
  const std::vector<std::size_t> lengths = long_run_lengths();
  const std::size_t dim = 3, rows = 2 * lengths.size() + 1;
  const batch b = long_run_batch(lengths, dim, 91);
  const long_run_expectation want = expect_long_runs(b, rows, dim);
  ASSERT_TRUE(want.tree_differs_from_plain) << "the batch does not tell the tree from a plain sum";
  struct setup_case {
    int ranks;
    memory_type type;
    memory_location loc;
  };
  for (const setup_case sc : {setup_case{1, memory_type::chunked, memory_location::device},
                              setup_case{1, memory_type::continuous, memory_location::host},
                              setup_case{2, memory_type::distributed, memory_location::device}}) {
    run_gpu_ranks(sc.ranks, rank_setup::shared_gpu_host, [&](gpu_rank& g) {
      table_options o;
      o.rows = rows;
      o.dim = dim;
      o.type = sc.type;
      o.location = sc.loc;
      o.init.method = init_options::zeros;
      table tb = table::create(g.comm, o);
      const auto [first, last] = slice(b.index.size(), g.comm->size(), g.comm->rank(), 0);
      apply_slice_gpu(tb, b, first, last, dtype::int32, dtype::float32, 1.0f, g);
      const own_content mine = own_content_of(tb);
      const row_range own = tb.own_rows();
      for (std::size_t r = own.begin; r < own.end; ++r) {
        for (std::size_t c = 0; c < dim; ++c) {
          float got = 0;
          std::memcpy(&got, mine.weights.data() + ((r - own.begin) * dim + c) * sizeof(float),
                      sizeof(float));
          ASSERT_EQ(std::memcmp(&got, &want.weights[r * dim + c], sizeof(float)), 0)
              << "row " << r << " column " << c << ": " << got << ", want "
              << want.weights[r * dim + c] << " (" << g.comm->size() << " ranks, "
              << wholememory::memory_type_name(sc.type) << " "
              << wholememory::memory_location_name(sc.loc) << ")";
        }
      }
    });
  }
}

TEST(GpuApply, AnOutOfRangeIndexNamesItAndChangesNothingOnAnyRank) {
  EMBED_REQUIRE_GPUS(1);
  for (int ranks : {1, 2}) {
    run_gpu_ranks(ranks, rank_setup::shared_gpu_host, [](gpu_rank& g) {
      const int rank = g.comm->rank();
      const table_options o = options_for(optimizer_kind::adam, dtype::bfloat16, 33,
                                          memory_type::chunked, memory_location::device, 4);
      table tb = table::create(g.comm, o);
      batch good = global_batch(4, 0, 40, test_rows, 33);
      apply_slice_gpu(tb, good, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
      const own_content before = own_content_of(tb);
      for (std::int64_t bad : {std::int64_t{test_rows}, std::int64_t{-5}}) {
        batch b = global_batch(4, 1, 40, test_rows, 33);
        if (rank == g.comm->size() - 1) b.index[17] = bad;
        try {
          apply_slice_gpu(tb, b, 0, 40, dtype::int32, dtype::float16, 0.1f, g);
          ADD_FAILURE() << "no error for index " << bad;
        } catch (const wholememory::logic_error& e) {
          const std::string what = e.what();
          const bool mine = rank == g.comm->size() - 1;
          EXPECT_NE(what.find(mine ? "index " + std::to_string(bad) + " at position 17"
                                   : "passed index " + std::to_string(bad) + " at position 17"),
                    std::string::npos)
              << what;
        }
        EXPECT_TRUE(own_content_of(tb) == before) << "rank " << rank << " changed";
      }
      apply_slice_gpu(tb, good, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
      EXPECT_EQ(tb.step(), 2u);
    });
  }
}

// The NCCL path agrees on the device (the ranks' records gathered by one NCCL allgather, no
// bootstrap round): a bad index, a wrong argument or another learning rate on one rank still
// fails every rank with the same words as the bootstrap's agreement and changes nothing; the
// next good call goes on; empty calls advance the step.  On 2, 3 and 4 GPUs where present.
TEST(GpuApply, OnNcclABadCallOnOneRankFailsEveryRankAndChangesNothing) {
  EMBED_REQUIRE_GPUS(2);
  for (int ranks = 2; ranks <= std::min(4, gpu_count()); ++ranks) {
    run_gpu_ranks(ranks, rank_setup::own_gpu_nccl, [](gpu_rank& g) {
      const bool culprit = g.comm->rank() == g.comm->size() - 1;
      for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
        const table_options o =
            options_for(optimizer_kind::adam, dtype::float32, 33, type, memory_location::device, 4);
        table tb = table::create(g.comm, o);
        batch good = global_batch(4, 0, 40, test_rows, 33);
        apply_slice_gpu(tb, good, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
        const own_content before = own_content_of(tb);
        batch b = global_batch(4, 1, 40, test_rows, 33);
        if (culprit) b.index[17] = test_rows + 3;
        try {
          apply_slice_gpu(tb, b, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
          ADD_FAILURE() << "no error for the bad index";
        } catch (const wholememory::logic_error& e) {
          const std::string what = e.what();
          const std::string want =
              culprit ? "index " + std::to_string(test_rows + 3) + " at position 17 is outside"
                      : "rank " + std::to_string(g.comm->size() - 1) + " passed index " +
                            std::to_string(test_rows + 3) + " at position 17";
          EXPECT_NE(what.find(want), std::string::npos) << what;
        }
        EXPECT_TRUE(own_content_of(tb) == before) << "a bad index changed rows";
        // An argument error on the last rank (gradients of another width).
        try {
          if (culprit) {
            std::vector<float> grads(40 * 7, 1.0f);
            wholememory::device_buffer d_grads(grads.size() * 4, g.device);
            std::vector<std::int64_t> idx(40, 1);
            wholememory::device_buffer d_idx(idx.size() * 8, g.device);
            WM_CUDA_TRY(cudaMemcpy(d_idx.data(), idx.data(), idx.size() * 8, cudaMemcpyDefault));
            tb.apply_gradients(wholememory::index_array{d_idx.data(), dtype::int64, 40},
                               wholememory::dense_matrix{d_grads.data(), dtype::float32, 40, 7, 7},
                               0.1f, g.stream);
          } else {
            apply_slice_gpu(tb, b, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
          }
          ADD_FAILURE() << "no error for the argument error";
        } catch (const wholememory::logic_error& e) {
          const std::string what = e.what();
          if (!culprit) {
            EXPECT_NE(what.find("passed invalid arguments"), std::string::npos) << what;
          }
        }
        EXPECT_TRUE(own_content_of(tb) == before) << "an argument error changed rows";
        // Another learning rate on the last rank.
        try {
          apply_slice_gpu(tb, good, 0, 40, dtype::int64, dtype::float32, culprit ? 0.2f : 0.1f, g);
          ADD_FAILURE() << "no error for differing learning rates";
        } catch (const wholememory::mismatch_error& e) {
          EXPECT_NE(std::string(e.what()).find("learning rate"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(own_content_of(tb) == before) << "a learning-rate mismatch changed rows";
        // Empty calls advance the step; a good call goes on from there.
        tb.apply_gradients(wholememory::index_array{nullptr, dtype::int64, 0},
                           wholememory::dense_matrix{nullptr, dtype::float32, 0, 33, 33}, 0.1f,
                           g.stream);
        const std::uint64_t step = tb.step();
        apply_slice_gpu(tb, good, 0, 40, dtype::int64, dtype::float32, 0.1f, g);
        EXPECT_EQ(tb.step(), step + 1);
        EXPECT_FALSE(own_content_of(tb) == before);
      }
    });
  }
}

// The steady state of a multi-rank step over NCCL makes no bootstrap (TCP) round: the
// records cross in an NCCL allgather, the peer exchange's fences are NCCL allreduces and the
// all-to-all uses the agreed collectives (issue 34).
TEST(GpuApply, OnNcclUpdatesMakeNoBootstrapRound) {
  EMBED_REQUIRE_GPUS(2);
  for (int ranks = 2; ranks <= std::min(4, gpu_count()); ++ranks) {
    run_gpu_ranks(ranks, rank_setup::own_gpu_nccl, [](gpu_rank& g) {
      for (memory_type type :
           {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
        const table_options o = options_for(optimizer_kind::adagrad, dtype::float32, 40, type,
                                            memory_location::device, 9);
        table tb = table::create(g.comm, o);
        // The first call makes the peer exchange's buffers (a collective allocation: its
        // rounds); the steady state begins after it.
        batch first = global_batch(9, 7, 300, test_rows, 40);
        auto [f0, f1] = slice(300, g.comm->size(), g.comm->rank(), 7);
        apply_slice_gpu(tb, first, f0, f1, dtype::int64, dtype::float32, 0.1f, g);
        g.comm->get_bootstrap().barrier();
        const std::uint64_t before = g.comm->get_bootstrap().rounds();
        for (int s = 0; s < 3; ++s) {
          batch b = global_batch(9, s, 300, test_rows, 40);
          auto [first, last] = slice(300, g.comm->size(), g.comm->rank(), s);
          apply_slice_gpu(tb, b, first, last, dtype::int64, dtype::float32, 0.1f, g);
        }
        EXPECT_EQ(g.comm->get_bootstrap().rounds(), before)
            << wholememory::memory_type_name(type) << ", " << g.comm->size() << " ranks";
      }
    });
  }
}

// Two, three and four ranks over NCCL (one GPU each) against the CPU path, bit for bit, with
// the gradient rows through the peer exchange (the default; GpuApplyTwoRanks covers two ranks
// with it) and through NCCL's all-to-all.
TEST(GpuApply, ThreeAndFourRanksOverNcclMatchTheCpuPathBitForBit) {
  EMBED_REQUIRE_GPUS(2);
  using exchange = table_options::exchange_kind;
  for (int ranks = 2; ranks <= std::min(4, gpu_count()); ++ranks) {
    for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
      for (exchange x : {exchange::peer, exchange::collective}) {
        if (ranks == 2 && x == exchange::peer) continue;
        run_gpu_ranks(ranks, rank_setup::own_gpu_nccl, [type, x](gpu_rank& g) {
          every_optimizer_matches_the_cpu_path(g, type, memory_location::device, x);
        });
      }
    }
  }
}

TEST(GpuApply, DeferredCheckGivesTheCheckedBitsAndABadIndexStopsEveryUpdateOnTheWord) {
  EMBED_REQUIRE_GPUS(1);
  run_gpu_ranks(1, rank_setup::shared_gpu_host, [](gpu_rank& g) {
    check_word word(g.device);
    // The documented tree for runs of 1 to 40000 duplicates (up to three levels), nothing
    // waited for: the spec's sums, as with the checked call.
    {
      const std::vector<std::size_t> lengths = long_run_lengths();
      const std::size_t dim = 8, rows = 2 * lengths.size() + 1;
      const batch b = long_run_batch(lengths, dim, 92);
      const long_run_expectation want = expect_long_runs(b, rows, dim);
      table_options o;
      o.rows = rows;
      o.dim = dim;
      o.type = memory_type::chunked;
      o.location = memory_location::device;
      o.init.method = init_options::zeros;
      table tb = table::create(g.comm, o);
      apply_slice_gpu(tb, b, 0, b.index.size(), dtype::int64, dtype::float32, 1.0f, g, word.get());
      EXPECT_EQ(word.read(), ~0ull);
      const own_content mine = own_content_of(tb);
      ASSERT_EQ(mine.weights.size(), want.weights.size() * sizeof(float));
      EXPECT_EQ(std::memcmp(mine.weights.data(), want.weights.data(), mine.weights.size()), 0)
          << "the deferred call's tree sums differ from the spec's";
    }
    // Adam, float32 dim 128 (the float4 path) and bfloat16 dim 33: the CPU path's bits over
    // three steps; then a bad index leaves its position in the word without throwing, and that
    // call and every later one carrying the word change nothing but the step; once the word
    // is reset the table trains on as the checked table that took empty calls instead.
    std::uint64_t seed = 950;
    for (const auto& [t, dim] : {std::pair{dtype::float32, std::size_t{128}},
                                 std::pair{dtype::bfloat16, std::size_t{33}}}) {
      const table_options o = options_for(optimizer_kind::adam, t, dim, memory_type::chunked,
                                          memory_location::device, ++seed);
      table tb = table::create(g.comm, o), checked = table::create(g.comm, o);
      for (int s = 0; s < steps; ++s) {
        const batch b = global_batch(seed, s, batch_entries, test_rows, dim);
        apply_slice_gpu(tb, b, 0, batch_entries, s % 2 ? dtype::int32 : dtype::int64,
                        grad_type_of(s), learning_rate, g, word.get());
        apply_slice_gpu(checked, b, 0, batch_entries, dtype::int64, grad_type_of(s), learning_rate,
                        g);
      }
      const table base = cpu_baseline(o, seed);
      const std::string what = describe(o);
      ASSERT_TRUE(own_content_of(tb) == rows_of(base, tb.own_rows())) << what;
      const own_content before = own_content_of(tb);
      batch bad = global_batch(seed, 7, batch_entries, test_rows, dim);
      bad.index[17] = static_cast<std::int64_t>(test_rows);
      bad.index[400] = -3;
      apply_slice_gpu(tb, bad, 0, batch_entries, dtype::int64, dtype::float32, learning_rate, g,
                      word.get());
      EXPECT_EQ(word.read(), 17u) << what;
      const batch good = global_batch(seed, 8, batch_entries, test_rows, dim);
      apply_slice_gpu(tb, good, 0, batch_entries, dtype::int32, dtype::float32, learning_rate, g,
                      word.get());
      EXPECT_EQ(word.read(), 17u) << what;
      own_content after = own_content_of(tb);
      EXPECT_EQ(after.step, before.step + 2) << what;
      after.step = before.step;
      EXPECT_TRUE(after == before) << what << ": a call on a set word changed the table";
      for (int e = 0; e < 2; ++e) {
        checked.apply_gradients(wholememory::index_array{nullptr, dtype::int64, 0},
                                wholememory::dense_matrix{nullptr, dtype::float32, 0, dim, dim},
                                learning_rate, g.stream);
      }
      word.reset();
      apply_slice_gpu(tb, good, 0, batch_entries, dtype::int32, dtype::float32, learning_rate, g,
                      word.get());
      apply_slice_gpu(checked, good, 0, batch_entries, dtype::int64, dtype::float32, learning_rate,
                      g);
      EXPECT_EQ(word.read(), ~0ull);
      EXPECT_TRUE(own_content_of(tb) == own_content_of(checked))
          << what << ": after the reset the deferred table differs from the checked one";
    }
  });
}

TEST(GpuApply, UpdateAfterHoldsTheRowWritesUntilTheEventAndNotTheRouting) {
  EMBED_REQUIRE_GPUS(1);
  run_gpu_ranks(1, rank_setup::shared_gpu_host, [](gpu_rank& g) {
    check_word word(g.device);
    for (bool deferred : {false, true}) {
      const table_options o = options_for(optimizer_kind::adam, dtype::float32, 128,
                                          memory_type::chunked, memory_location::device, 31);
      table tb = table::create(g.comm, o), checked = table::create(g.comm, o);
      const batch b = global_batch(31, 0, batch_entries, test_rows, 128);
      apply_slice_gpu(checked, b, 0, batch_entries, dtype::int64, dtype::float32, learning_rate, g);
      const own_content before = own_content_of(tb);
      // Another stream held by a host function until the test releases it; the event after it
      // is what the update waits for.
      cudaStream_t other = nullptr;
      cudaEvent_t gate = nullptr;
      WM_CUDA_TRY(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
      WM_CUDA_TRY(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming));
      std::atomic<bool> release{false};
      WM_CUDA_TRY(cudaLaunchHostFunc(
          other,
          [](void* p) {
            auto* r = static_cast<std::atomic<bool>*>(p);
            while (!r->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          },
          &release));
      WM_CUDA_TRY(cudaEventRecord(gate, other));
      const std::size_t n = batch_entries, stride = 128 + 2;
      auto di = to_device(index_bytes(b.index.data(), n, dtype::int64), g.device);
      auto dg = to_device(encode_floats(b.grads.data(), n, 128, stride, dtype::float32), g.device);
      apply_options options;
      options.update_after = gate;
      options.deferred_check = deferred ? word.get() : nullptr;
      tb.apply_gradients(wholememory::index_array{di.data(), dtype::int64, n},
                         wholememory::dense_matrix{dg.data(), dtype::float32, n, 128, stride},
                         learning_rate, g.stream, options);
      // The call has returned (its routing ran, or is queued); the rows must still wait.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      own_content held = own_content_of(tb);  // copies on the legacy stream, not waiting
      EXPECT_EQ(cudaStreamQuery(g.stream), cudaErrorNotReady) << "the update did not wait";
      held.step = before.step;
      EXPECT_TRUE(held == before) << "rows changed before the event (deferred " << deferred << ")";
      release = true;
      WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
      EXPECT_TRUE(own_content_of(tb) == own_content_of(checked))
          << "after the event the table differs from the checked call's (deferred " << deferred
          << ")";
      WM_CUDA_TRY(cudaStreamSynchronize(other));
      WM_CUDA_TRY(cudaEventDestroy(gate));
      WM_CUDA_TRY(cudaStreamDestroy(other));
    }
  });
}

TEST(GpuApply, EmptyCallsOnEveryRankAdvanceTheStepOnly) {
  EMBED_REQUIRE_GPUS(1);
  run_gpu_ranks(2, rank_setup::shared_gpu_host, [](gpu_rank& g) {
    const table_options o = options_for(optimizer_kind::rmsprop, dtype::float32, 5,
                                        memory_type::distributed, memory_location::device, 8);
    table tb = table::create(g.comm, o);
    const own_content before = own_content_of(tb);
    tb.apply_gradients(wholememory::index_array{nullptr, dtype::int64, 0},
                       wholememory::dense_matrix{nullptr, dtype::float32, 0, 5, 5}, 0.1f, g.stream);
    own_content after = own_content_of(tb);
    EXPECT_EQ(after.step, 1u);
    after.step = 0;
    EXPECT_TRUE(after == before);
  });
}

TEST(GpuApply, LookupAndScatterRowsOnTheGpu) {
  EMBED_REQUIRE_GPUS(1);
  run_gpu_ranks(1, rank_setup::shared_gpu_host, [](gpu_rank& g) {
    for (memory_location loc : {memory_location::device, memory_location::host}) {
      table_options o =
          options_for(optimizer_kind::sgd, dtype::float16, 33, memory_type::continuous, loc, 12);
      table tb = table::create(g.comm, o);
      std::vector<std::int64_t> idx{0, 96, 5, 5, 40};
      auto di = to_device(index_bytes(idx.data(), idx.size(), dtype::int32), g.device);
      wholememory::device_buffer out(idx.size() * 33 * 4, g.device);
      tb.lookup(wholememory::index_array{di.data(), dtype::int32, idx.size()},
                wholememory::dense_matrix{out.data(), dtype::float32, idx.size(), 33, 33},
                g.stream);
      WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
      std::vector<float> host(idx.size() * 33);
      WM_CUDA_TRY(cudaMemcpy(host.data(), out.data(), host.size() * 4, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < idx.size(); ++i)
        for (std::size_t c = 0; c < 33; ++c)
          ASSERT_EQ(host[i * 33 + c], round_to(dtype::float16, init_value(o.init, idx[i], c)));
      // Raw rows in, the same rows out.
      std::vector<float> rows(2 * 33);
      for (std::size_t k = 0; k < rows.size(); ++k) rows[k] = static_cast<float>(k) / 4.0f;
      std::vector<char> raw(rows.size() * 4);
      std::memcpy(raw.data(), rows.data(), raw.size());
      auto dr = to_device(raw, g.device);
      std::vector<std::int64_t> targets{3, 90};
      auto dt = to_device(index_bytes(targets.data(), 2, dtype::int64), g.device);
      tb.scatter_rows(wholememory::index_array{dt.data(), dtype::int64, 2},
                      wholememory::dense_matrix{dr.data(), dtype::float32, 2, 33, 33}, g.stream);
      tb.lookup(wholememory::index_array{dt.data(), dtype::int64, 2},
                wholememory::dense_matrix{out.data(), dtype::float32, 2, 33, 33}, g.stream);
      WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
      WM_CUDA_TRY(cudaMemcpy(host.data(), out.data(), 2 * 33 * 4, cudaMemcpyDeviceToHost));
      for (std::size_t k = 0; k < rows.size(); ++k) ASSERT_EQ(host[k], rows[k]);
    }
  });
}

}  // namespace wholestore_test::embed
