// apply_scaled_gradients on the GPU: gradient rows given by reference (coefficient x a row of
// a float32 source table) against apply_gradients of the same rows materialized on the host
// (one rounded float32 product per element), bit for bit: every optimizer and table dtype,
// dims 1, 33 and 128 (the float4 path), groups 1, 3 and 6, int32 and int64 lists, continuous
// and chunked tables in device and host memory, with hot rows of more duplicates than the
// tree's group of 32.  Edge cases: no entries, one entry, every entry on one row (a two-level
// tree); bad target and source indices and bad arguments refused with the table untouched.
//
// The test process never calls CUDA (a forked child of a process that did could not): devices
// are counted in a short-lived child, and every body runs in a forked rank.  The argument
// checks need no device (they fail before one is touched), so that test runs without a GPU.
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
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace wholestore_test::embed {
namespace {

#define SCALED_REQUIRE_GPU()                                                                   \
  do {                                                                                         \
    if (gpu_count() < 1) GTEST_SKIP() << "needs a CUDA device, " << gpu_count() << " visible"; \
  } while (0)

/// One rank on GPU 0 with a host communicator and a stream (nullptr when `use_gpu` is off:
/// the body must not reach the device).
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

void run_one_rank(bool use_gpu, const std::function<void(gpu_rank&)>& body) {
  fork_result result = fork_ranks(1, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    gpu_rank g;
    if (use_gpu) {
      wholememory::set_device(g.device);
      WM_CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    }
    g.comm = wholememory::make_host_communicator(bs);
    body(g);
  });
  EXPECT_EQ(result.status[0], 0) << "the rank failed";
}

wholememory::device_buffer to_device(const std::vector<char>& bytes, int device) {
  wholememory::device_buffer b(std::max<std::size_t>(bytes.size(), 1), device);
  if (!bytes.empty())
    WM_CUDA_TRY(cudaMemcpy(b.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return b;
}

std::vector<char> float_bytes(const std::vector<float>& v) {
  std::vector<char> out(v.size() * sizeof(float) + 4);
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

constexpr std::size_t source_rows_count = 61;
constexpr std::size_t target_rows_count = 97;
constexpr float learning_rate = 0.05f;

/// One step's entries in the scaled form: target rows, one source row per group of entries,
/// a coefficient per entry.
struct scaled_batch {
  std::vector<std::int64_t> index;   // n target rows
  std::vector<std::int64_t> source;  // n / group source rows
  std::size_t group = 1;
  std::vector<float> coefs;  // n
};

/// About half of the targets on 4 hot rows (many more than 32 duplicates each), the rest
/// uniform, the first and last rows present; coefficients of mixed magnitude and sign (as
/// SGNS's: a sigmoid in (-1, 1), some tiny).
scaled_batch make_batch(std::uint64_t seed, int step, std::size_t groups, std::size_t group) {
  scaled_batch b;
  const std::size_t n = groups * group;
  b.index = global_batch(seed, step, n, target_rows_count, 1).index;
  b.group = group;
  for (std::size_t i = 0; i < groups; ++i)
    b.source.push_back(static_cast<std::int64_t>(hash3(seed, 77, i) % source_rows_count));
  if (groups > 0) b.source.back() = static_cast<std::int64_t>(source_rows_count) - 1;
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint64_t h = hash3(seed + 5, static_cast<std::uint64_t>(step), j);
    b.coefs.push_back(signed_unit(h) * ((h & 64) ? 1e-3f : 1.0f));
  }
  return b;
}

/// The gradient rows the scaled form stands for: coefs[j] * source row source[j / group], one
/// float32 multiply per element (nothing to contract), from the source table's own bytes.
std::vector<float> materialize(const scaled_batch& b, const table& source) {
  const std::size_t dim = source.dim();
  const std::vector<unsigned char> bytes = own_bytes(source.weights_memory());
  std::vector<float> rows(b.index.size() * dim);
  for (std::size_t j = 0; j < b.index.size(); ++j) {
    const auto r = static_cast<std::size_t>(b.source[j / b.group]);
    for (std::size_t c = 0; c < dim; ++c) {
      float u = 0;
      std::memcpy(&u, bytes.data() + (r * dim + c) * sizeof(float), sizeof(float));
      rows[j * dim + c] = b.coefs[j] * u;
    }
  }
  return rows;
}

/// Both forms of one step on the two tables (`by_rows` takes the materialized rows,
/// `by_reference` the scaled form); waits for the stream.  The materialized rows come from
/// `all_rows` (a one-rank copy of the source) where given, else from the source's own bytes.
void apply_both(table& by_rows, table& by_reference, const table& source, const scaled_batch& b,
                dtype index_type, dtype source_type, const gpu_rank& g,
                const table* all_rows = nullptr) {
  const std::size_t n = b.index.size(), dim = source.dim();
  auto di = to_device(index_bytes(b.index.data(), n, index_type), g.device);
  auto ds = to_device(index_bytes(b.source.data(), b.source.size(), source_type), g.device);
  auto dc = to_device(float_bytes(b.coefs), g.device);
  auto dg = to_device(float_bytes(materialize(b, all_rows ? *all_rows : source)), g.device);
  by_rows.apply_gradients(
      wholememory::index_array{n ? di.data() : nullptr, index_type, n},
      wholememory::dense_matrix{n ? dg.data() : nullptr, dtype::float32, n, dim, dim},
      learning_rate, g.stream);
  scaled_rows sr;
  sr.source = &source;
  sr.source_rows = wholememory::index_array{n ? ds.data() : nullptr, source_type, b.source.size()};
  sr.group = b.group;
  sr.coefs = n ? dc.data_as<float>() : nullptr;
  by_reference.apply_scaled_gradients(
      wholememory::index_array{n ? di.data() : nullptr, index_type, n}, sr, learning_rate,
      g.stream);
  WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
}

table_options target_options(optimizer_kind k, dtype t, std::size_t dim, memory_type type,
                             memory_location loc, std::uint64_t seed) {
  table_options o;
  o.rows = target_rows_count;
  o.dim = dim;
  o.dtype = t;
  o.type = type;
  o.location = loc;
  o.init.method = seed % 2 == 0 ? init_options::normal : init_options::uniform;
  o.init.a = -0.5;
  o.init.b = 0.5;
  o.init.std = 0.2;
  o.init.seed = seed;
  o.optimizer = optimizer_for(k, seed % 3 == 1);
  return o;
}

table make_source(const gpu_rank& g, std::size_t dim, memory_type type, memory_location loc,
                  std::uint64_t seed) {
  table_options o;
  o.rows = source_rows_count;
  o.dim = dim;
  o.type = type;
  o.location = loc;
  o.init.a = -1.0;
  o.init.b = 1.0;
  o.init.seed = seed;
  return table::create(g.comm, o);
}

std::string describe(const table_options& o) {
  return std::string(optimizer_name(o.optimizer.kind)) + " " + wholememory::dtype_name(o.dtype) +
         " dim " + std::to_string(o.dim) + " " + wholememory::memory_type_name(o.type) + " " +
         wholememory::memory_location_name(o.location);
}

void expect_same(const table& by_rows, const table& by_reference, const std::string& what) {
  const own_content want = own_content_of(by_rows), got = own_content_of(by_reference);
  ASSERT_EQ(got.step, want.step) << what;
  ASSERT_EQ(first_difference(got.weights, want.weights), -1)
      << what << ": weights differ at byte " << first_difference(got.weights, want.weights);
  ASSERT_EQ(got.state.size(), want.state.size()) << what;
  for (std::size_t i = 0; i < want.state.size(); ++i)
    ASSERT_EQ(first_difference(got.state[i], want.state[i]), -1)
        << what << ": state " << by_rows.state_names()[i] << " differs at byte "
        << first_difference(got.state[i], want.state[i]);
}

using param = std::tuple<memory_type, memory_location>;
class GpuScaledApply : public ::testing::TestWithParam<param> {};

}  // namespace

TEST_P(GpuScaledApply, EveryOptimizerDtypeAndDimMatchesMaterializedRowsBitForBit) {
  SCALED_REQUIRE_GPU();
  auto [type, loc] = GetParam();
  run_one_rank(true, [type = type, loc = loc](gpu_rank& g) {
    std::uint64_t seed = 300;
    for (std::size_t dim : {std::size_t{1}, std::size_t{33}, std::size_t{128}}) {
      const table source = make_source(g, dim, type, loc, dim);
      for (optimizer_kind k : all_optimizers()) {
        for (dtype t : table_dtypes()) {
          const table_options o = target_options(k, t, dim, type, loc, ++seed);
          table by_rows = table::create(g.comm, o), by_reference = table::create(g.comm, o);
          // Groups of 6 (SGNS with 5 negatives), 1 and 3 entries; 700-1200 entries a step.
          const std::size_t groups[] = {200, 700, 400};
          const std::size_t group_sizes[] = {6, 1, 3};
          for (int s = 0; s < 3; ++s) {
            const scaled_batch b = make_batch(seed, s, groups[s], group_sizes[s]);
            apply_both(by_rows, by_reference, source, b, s % 2 ? dtype::int32 : dtype::int64,
                       s == 1 ? dtype::int32 : dtype::int64, g);
            expect_same(by_rows, by_reference, describe(o) + " step " + std::to_string(s));
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndLocations, GpuScaledApply,
    ::testing::Combine(::testing::Values(memory_type::continuous, memory_type::chunked),
                       ::testing::Values(memory_location::device, memory_location::host)),
    [](const auto& info) {
      return std::string(wholememory::memory_type_name(std::get<0>(info.param))) + "_" +
             wholememory::memory_location_name(std::get<1>(info.param));
    });

// Several ranks: each rank passes its share of the groups; entries cross to their owners as
// (source row, coefficient) and the owners read the source rows in place.  Against the same
// steps given as materialized rows (apply_gradients), bit for bit, on 2, 3 and 4 GPUs over
// NCCL and on two ranks sharing GPU 0 over the host communicator; continuous and chunked
// tables; a rank with no entries in a step included.
TEST(GpuScaledApplyRanks, SeveralRanksMatchMaterializedRowsBitForBit) {
  SCALED_REQUIRE_GPU();
  struct setup {
    int ranks;
    bool nccl;
  };
  std::vector<setup> setups{{2, false}};
  for (int r = 2; r <= std::min(4, gpu_count()); ++r) setups.push_back({r, true});
  for (const setup su : setups) {
    fork_result result = fork_ranks(su.ranks, [su](std::shared_ptr<wholememory::bootstrap> bs) {
      gpu_rank g;
      g.device = su.nccl ? bs->rank() : 0;
      wholememory::set_device(g.device);
      WM_CUDA_TRY(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
      g.comm = su.nccl ? wholememory::make_nccl_communicator(bs, g.device)
                       : wholememory::make_host_communicator(bs);
      // Every source row, from a one-rank copy (the table is a function of seed and row).
      auto solo_bs = wholememory::make_thread_bootstraps(1);
      gpu_rank solo;
      solo.comm = wholememory::make_host_communicator(
          std::shared_ptr<wholememory::bootstrap>(std::move(solo_bs[0])));
      std::uint64_t seed = 900;
      for (memory_type type : {memory_type::continuous, memory_type::chunked}) {
        for (std::size_t dim : {std::size_t{33}, std::size_t{128}}) {
          const table source = make_source(g, dim, type, memory_location::device, dim);
          const table all_rows =
              make_source(solo, dim, memory_type::continuous, memory_location::host, dim);
          for (optimizer_kind k : {optimizer_kind::adam, optimizer_kind::rowwise_adagrad}) {
            const table_options o =
                target_options(k, dtype::float32, dim, type, memory_location::device, ++seed);
            table by_rows = table::create(g.comm, o), by_reference = table::create(g.comm, o);
            const std::size_t groups[] = {300, 0, 170};  // step 1: no entries on any rank
            for (int s = 0; s < 3; ++s) {
              const std::size_t group = 6;
              const scaled_batch whole = make_batch(seed, s, groups[s], group);
              // This rank's groups (the last rank gets none in step 2).
              const int ranks = g.comm->size(), rank = g.comm->rank();
              const std::size_t shares = s == 2 ? ranks - 1 : ranks;
              const std::size_t g0 =
                  rank < static_cast<int>(shares) ? groups[s] * rank / shares : groups[s];
              const std::size_t g1 =
                  rank < static_cast<int>(shares) ? groups[s] * (rank + 1) / shares : groups[s];
              scaled_batch mine;
              mine.group = group;
              mine.index.assign(whole.index.begin() + g0 * group, whole.index.begin() + g1 * group);
              mine.source.assign(whole.source.begin() + g0, whole.source.begin() + g1);
              mine.coefs.assign(whole.coefs.begin() + g0 * group, whole.coefs.begin() + g1 * group);
              apply_both(by_rows, by_reference, source, mine, dtype::int64, dtype::int32, g,
                         &all_rows);
              expect_same(by_rows, by_reference,
                          describe(o) + ", " + std::to_string(ranks) + " ranks " +
                              (su.nccl ? "over NCCL" : "sharing GPU 0") + ", step " +
                              std::to_string(s));
            }
          }
        }
      }
    });
    for (int r = 0; r < su.ranks; ++r)
      EXPECT_EQ(result.status[r], 0) << su.ranks << " ranks, rank " << r << " failed";
  }
}

TEST(GpuScaledApplyEdges, NoEntriesOneEntryAndOneRowForAllMatchMaterializedRows) {
  SCALED_REQUIRE_GPU();
  run_one_rank(true, [](gpu_rank& g) {
    for (optimizer_kind k : {optimizer_kind::sgd, optimizer_kind::adam, optimizer_kind::adagrad}) {
      const std::size_t dim = 128;
      const table source = make_source(g, dim, memory_type::chunked, memory_location::device, 9);
      const table_options o =
          target_options(k, dtype::float32, dim, memory_type::chunked, memory_location::device, 40);
      table by_rows = table::create(g.comm, o), by_reference = table::create(g.comm, o);
      // No entries: the step advances, nothing else changes.
      const own_content before = own_content_of(by_reference);
      apply_both(by_rows, by_reference, source, scaled_batch{}, dtype::int64, dtype::int64, g);
      own_content after = own_content_of(by_reference);
      EXPECT_EQ(after.step, 1u);
      after.step = 0;
      EXPECT_TRUE(after == before) << "an empty call changed the table";
      expect_same(by_rows, by_reference, std::string(optimizer_name(k)) + " no entries");
      // One entry, on the last row.
      scaled_batch one;
      one.index = {static_cast<std::int64_t>(target_rows_count) - 1};
      one.source = {0};
      one.coefs = {-0.75f};
      apply_both(by_rows, by_reference, source, one, dtype::int32, dtype::int64, g);
      expect_same(by_rows, by_reference, std::string(optimizer_name(k)) + " one entry");
      // 4000 entries on row 0 in groups of 8: two levels of the tree (4000 > 32 * 32).
      scaled_batch hot = make_batch(17, 3, 500, 8);
      std::fill(hot.index.begin(), hot.index.end(), 0);
      apply_both(by_rows, by_reference, source, hot, dtype::int64, dtype::int32, g);
      expect_same(by_rows, by_reference, std::string(optimizer_name(k)) + " one hot row");
    }
  });
}

TEST(GpuScaledApplyEdges, BadTargetOrSourceIndexNamesItAndChangesNothing) {
  SCALED_REQUIRE_GPU();
  run_one_rank(true, [](gpu_rank& g) {
    const std::size_t dim = 33;
    const table source = make_source(g, dim, memory_type::continuous, memory_location::device, 3);
    const table_options o = target_options(optimizer_kind::adam, dtype::bfloat16, dim,
                                           memory_type::continuous, memory_location::device, 4);
    table by_rows = table::create(g.comm, o), tb = table::create(g.comm, o);
    apply_both(by_rows, tb, source, make_batch(4, 0, 40, 6), dtype::int64, dtype::int64, g);
    const own_content before = own_content_of(tb);
    auto expect_refused = [&](const scaled_batch& b, const std::string& want) {
      const std::size_t n = b.index.size();
      auto di = to_device(index_bytes(b.index.data(), n, dtype::int32), g.device);
      auto ds = to_device(index_bytes(b.source.data(), b.source.size(), dtype::int64), g.device);
      auto dc = to_device(float_bytes(b.coefs), g.device);
      scaled_rows sr;
      sr.source = &source;
      sr.source_rows = wholememory::index_array{ds.data(), dtype::int64, b.source.size()};
      sr.group = b.group;
      sr.coefs = dc.data_as<float>();
      try {
        tb.apply_scaled_gradients(wholememory::index_array{di.data(), dtype::int32, n}, sr,
                                  learning_rate, g.stream);
        ADD_FAILURE() << "no error, expected " << want;
      } catch (const wholememory::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
      WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
      EXPECT_TRUE(own_content_of(tb) == before) << "refused call changed the table: " << want;
    };
    for (std::int64_t bad : {std::int64_t{target_rows_count}, std::int64_t{-5}}) {
      scaled_batch b = make_batch(4, 1, 40, 6);
      b.index[17] = bad;
      expect_refused(b, "index " + std::to_string(bad) + " at position 17");
    }
    for (std::int64_t bad : {std::int64_t{source_rows_count}, std::int64_t{-1}}) {
      scaled_batch b = make_batch(4, 1, 40, 6);
      b.source[29] = bad;
      expect_refused(b, "source row " + std::to_string(bad) + " at position 29");
    }
    EXPECT_EQ(tb.step(), 1u);
  });
}

TEST(GpuScaledApplyEdges, DeferredCheckMatchesTheCheckedCallAndKeepsABadSourceRowsPosition) {
  SCALED_REQUIRE_GPU();
  run_one_rank(true, [](gpu_rank& g) {
    const std::size_t dim = 128;
    const table source = make_source(g, dim, memory_type::chunked, memory_location::device, 5);
    const table_options o = target_options(optimizer_kind::adam, dtype::float32, dim,
                                           memory_type::chunked, memory_location::device, 6);
    table by_rows = table::create(g.comm, o), tb = table::create(g.comm, o);
    wholememory::device_buffer word(sizeof(unsigned long long), g.device);
    auto* w = word.data_as<unsigned long long>();
    WM_CUDA_TRY(cudaMemset(w, 0xff, sizeof(*w)));
    auto read_word = [&] {
      unsigned long long v = 0;
      WM_CUDA_TRY(cudaMemcpy(&v, w, sizeof(v), cudaMemcpyDeviceToHost));
      return v;
    };
    // Calls the deferred scaled form on tb (by_rows takes the materialized rows, checked).
    auto apply = [&](const scaled_batch& b, bool materialized_too) {
      const std::size_t n = b.index.size();
      auto di = to_device(index_bytes(b.index.data(), n, dtype::int64), g.device);
      auto ds = to_device(index_bytes(b.source.data(), b.source.size(), dtype::int32), g.device);
      auto dc = to_device(float_bytes(b.coefs), g.device);
      if (materialized_too) {
        auto dg = to_device(float_bytes(materialize(b, source)), g.device);
        by_rows.apply_gradients(wholememory::index_array{di.data(), dtype::int64, n},
                                wholememory::dense_matrix{dg.data(), dtype::float32, n, dim, dim},
                                learning_rate, g.stream);
      }
      scaled_rows sr;
      sr.source = &source;
      sr.source_rows = wholememory::index_array{ds.data(), dtype::int32, b.source.size()};
      sr.group = b.group;
      sr.coefs = dc.data_as<float>();
      apply_options options;
      options.deferred_check = w;
      tb.apply_scaled_gradients(wholememory::index_array{di.data(), dtype::int64, n}, sr,
                                learning_rate, g.stream, options);
      WM_CUDA_TRY(cudaStreamSynchronize(g.stream));
    };
    // 3000 entries in groups of 6, hot rows included: the checked materialized call's bits.
    for (int s = 0; s < 2; ++s) apply(make_batch(6, s, 500, 6), true);
    EXPECT_EQ(read_word(), ~0ull);
    expect_same(by_rows, tb, "deferred scaled form");
    const own_content before = own_content_of(tb);
    scaled_batch b = make_batch(6, 2, 500, 6);
    b.source[29] = static_cast<std::int64_t>(source_rows_count);
    apply(b, false);
    EXPECT_EQ(read_word(), 29u);
    own_content after = own_content_of(tb);
    EXPECT_EQ(after.step, before.step + 1);
    after.step = before.step;
    EXPECT_TRUE(after == before) << "a bad source row changed the table";
  });
}

TEST(GpuScaledApplyEdges, BadArgumentsAreRefusedBeforeTheDeviceIsTouched) {
  // No GPU needed: every case fails in the argument checks, before any CUDA call.
  run_one_rank(false, [](gpu_rank& g) {
    table_options o;
    o.rows = 10;
    o.dim = 8;
    o.type = memory_type::continuous;
    o.location = memory_location::host;
    table tb = table::create(g.comm, o), source = table::create(g.comm, o);
    table_options narrow = o;
    narrow.dim = 4;
    table other_dim = table::create(g.comm, narrow);
    table_options half = o;
    half.dtype = dtype::float16;
    table half_source = table::create(g.comm, half);
    const own_content before = own_content_of(tb);
    std::vector<std::int64_t> idx{1, 2, 3, 4}, src{5, 6};
    std::vector<float> coefs{0.5f, 0.5f, 0.5f, 0.5f};
    auto good = [&] {
      scaled_rows sr;
      sr.source = &source;
      sr.source_rows = wholememory::index_array{src.data(), dtype::int64, 2};
      sr.group = 2;
      sr.coefs = coefs.data();
      return sr;
    };
    const wholememory::index_array targets{idx.data(), dtype::int64, 4};
    auto expect_refused = [&](const wholememory::index_array& t, const scaled_rows& sr,
                              const std::string& want) {
      try {
        tb.apply_scaled_gradients(t, sr, learning_rate, nullptr);
        ADD_FAILURE() << "no error, expected " << want;
      } catch (const wholememory::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
      EXPECT_TRUE(own_content_of(tb) == before) << want;
    };
    scaled_rows sr = good();
    sr.source = nullptr;
    expect_refused(targets, sr, "no source table");
    sr = good();
    sr.source = &tb;
    expect_refused(targets, sr, "the source table is the table being updated");
    sr = good();
    sr.source = &half_source;
    expect_refused(targets, sr, "must be float32, it is float16");
    sr = good();
    sr.source = &other_dim;
    expect_refused(targets, sr, "the source table has dim 4, this table 8");
    sr = good();
    sr.group = 0;
    expect_refused(targets, sr, "group must be at least 1");
    sr = good();
    sr.group = 3;
    expect_refused(targets, sr, "2 source rows x group 3 for 4 indices");
    sr = good();
    sr.source_rows.type = dtype::float32;
    expect_refused(targets, sr, "source rows must be int32 or int64");
    sr = good();
    sr.source_rows.data = nullptr;
    expect_refused(targets, sr, "2 source rows at a null address");
    sr = good();
    sr.coefs = nullptr;
    expect_refused(targets, sr, "4 coefficients at a null address");
    expect_refused(wholememory::index_array{nullptr, dtype::int64, 4}, good(),
                   "4 indices at a null address");
    expect_refused(wholememory::index_array{idx.data(), dtype::float32, 4}, good(),
                   "indices must be int32 or int64");
    try {
      tb.apply_scaled_gradients(targets, good(), std::numeric_limits<float>::infinity(), nullptr);
      ADD_FAILURE() << "no error for an infinite learning rate";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("learning rate must be finite"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(tb.step(), 0u);
  });
}

}  // namespace wholestore_test::embed
